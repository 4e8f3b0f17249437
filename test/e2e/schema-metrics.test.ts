/**
 * GET /schema is a valid OpenAPI 3.1 document describing the model (commands, tracks, fps), and
 * GET /metrics is well-formed Prometheus text whose counters move while frames flow.
 *
 * Everything runs on 127.0.0.1: the runtime listens there and pins ICE to it.
 */

import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArclightClient } from '../../client/node.ts';
import pattern from '../../models/examples/pattern/index.ts';
import { startRuntime, type CommandMap, type Runtime } from '../../runtime/index.ts';
import { createLogger } from '../../server-kit/log.ts';

// ---- a small, strict parser for the Prometheus text exposition format (0.0.4) ----

type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';

interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
  readonly line: number;
}

interface Exposition {
  readonly samples: readonly Sample[];
  readonly types: ReadonlyMap<string, MetricType>;
  readonly help: ReadonlyMap<string, string>;
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
/**
 * Sample values are what Go's strconv.ParseFloat accepts (the exposition format's definition):
 * decimal floats, and "NaN", "Inf", "Infinity" in any case, the infinities optionally signed.
 * (prom-client writes NaN as "Nan", which Prometheus accepts.)
 */
const FLOAT = /^(?:[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]?inf(?:inity)?|nan)$/i;
const TYPES = new Set<MetricType>(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

function parseFloatStrict(text: string, where: string): number {
  if (!FLOAT.test(text)) throw new Error(`${where}: "${text}" is not a valid sample value`);
  if (/^\+?inf(inity)?$/i.test(text)) return Infinity;
  if (/^-inf(inity)?$/i.test(text)) return -Infinity;
  if (/^nan$/i.test(text)) return NaN;
  return Number(text);
}

/** The family a sample belongs to: its own name, or its histogram/summary base name. */
function familyOf(name: string, types: ReadonlyMap<string, MetricType>): string | undefined {
  if (types.has(name)) return name;
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (!name.endsWith(suffix)) continue;
    const base = name.slice(0, -suffix.length);
    const type = types.get(base);
    if (type === 'histogram' || (type === 'summary' && suffix !== '_bucket')) return base;
  }
  return undefined;
}

function parseLabels(text: string, where: string): Record<string, string> {
  // text is what lies between { and } (exclusive).
  const labels: Record<string, string> = {};
  let i = 0;
  while (i < text.length) {
    const nameMatch = /^[a-zA-Z_][a-zA-Z0-9_]*/.exec(text.slice(i));
    if (!nameMatch) throw new Error(`${where}: bad label name at "${text.slice(i)}"`);
    const name = nameMatch[0];
    i += name.length;
    if (text.slice(i, i + 2) !== '="') throw new Error(`${where}: expected =" after label ${name}`);
    i += 2;
    let value = '';
    for (;;) {
      if (i >= text.length) throw new Error(`${where}: unterminated value of label ${name}`);
      const ch = text[i]!;
      if (ch === '\\') {
        const next = text[i + 1];
        if (next === '\\') value += '\\';
        else if (next === '"') value += '"';
        else if (next === 'n') value += '\n';
        else throw new Error(`${where}: bad escape \\${next ?? ''} in label ${name}`);
        i += 2;
      } else if (ch === '"') {
        i++;
        break;
      } else if (ch === '\n') {
        throw new Error(`${where}: raw newline in label ${name}`);
      } else {
        value += ch;
        i++;
      }
    }
    if (!LABEL_NAME.test(name) || name.startsWith('__')) throw new Error(`${where}: invalid label name ${name}`);
    if (Object.hasOwn(labels, name)) throw new Error(`${where}: label ${name} given twice`);
    labels[name] = value;
    if (i < text.length) {
      if (text[i] !== ',') throw new Error(`${where}: expected , between labels at "${text.slice(i)}"`);
      i++;
    }
  }
  return labels;
}

function parseExposition(text: string): Exposition {
  const samples: Sample[] = [];
  const types = new Map<string, MetricType>();
  const help = new Map<string, string>();
  const familiesWithSamples = new Set<string>();
  const seriesSeen = new Set<string>();
  if (text.length > 0 && !text.endsWith('\n')) throw new Error('the exposition must end with a newline');
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  lines.forEach((line, index) => {
    const where = `line ${index + 1} (${JSON.stringify(line.slice(0, 120))})`;
    if (line.trim() === '') return;
    if (line.startsWith('#')) {
      const match = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
      if (!match) {
        // Other comments are allowed, but must not look like a malformed HELP/TYPE.
        if (/^#\s*(HELP|TYPE)\b/.test(line)) throw new Error(`${where}: malformed ${line.split(/\s+/)[1]} line`);
        return;
      }
      const [, keyword, name, rest] = match as unknown as [string, 'HELP' | 'TYPE', string, string];
      if (!METRIC_NAME.test(name)) throw new Error(`${where}: invalid metric name ${name}`);
      if (keyword === 'HELP') {
        if (help.has(name)) throw new Error(`${where}: second HELP for ${name}`);
        if (!/^(?:[^\\]|\\[\\n])*$/.test(rest)) throw new Error(`${where}: bad escape in HELP text`);
        help.set(name, rest);
      } else {
        if (!TYPES.has(rest as MetricType)) throw new Error(`${where}: unknown type "${rest}"`);
        if (types.has(name)) throw new Error(`${where}: second TYPE for ${name}`);
        if (familiesWithSamples.has(name)) throw new Error(`${where}: TYPE for ${name} after its samples`);
        types.set(name, rest as MetricType);
      }
      return;
    }
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: (-?\d+))?$/.exec(line);
    if (!match) throw new Error(`${where}: not "name{labels} value [timestamp]"`);
    const [, name, labelText, valueText] = match as unknown as [string, string, string | undefined, string];
    const labels = labelText === undefined ? {} : parseLabels(labelText, where);
    const value = parseFloatStrict(valueText, where);
    const family = familyOf(name, types);
    if (family === undefined) throw new Error(`${where}: sample ${name} has no preceding TYPE line`);
    familiesWithSamples.add(family);
    const series = `${name}{${Object.entries(labels)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
      .join(',')}}`;
    if (seriesSeen.has(series)) throw new Error(`${where}: duplicate series ${series}`);
    seriesSeen.add(series);
    samples.push({ name, labels, value, line: index + 1 });
  });
  checkFamilies(samples, types);
  return { samples, types, help };
}

/** Counters are ≥ 0; histogram buckets carry `le`, are cumulative, and end at +Inf = _count. */
function checkFamilies(samples: readonly Sample[], types: ReadonlyMap<string, MetricType>): void {
  for (const [family, type] of types) {
    if (type === 'counter') {
      for (const s of samples.filter((x) => x.name === family)) {
        if (!(s.value >= 0)) throw new Error(`line ${s.line}: counter ${family} is ${s.value}`);
      }
    }
    if (type !== 'histogram') continue;
    const buckets = samples.filter((s) => s.name === `${family}_bucket`);
    const groups = new Map<string, Sample[]>();
    for (const bucket of buckets) {
      if (bucket.labels['le'] === undefined) throw new Error(`line ${bucket.line}: ${family}_bucket without le`);
      const { le: _le, ...rest } = bucket.labels;
      const key = JSON.stringify(Object.entries(rest).sort());
      groups.set(key, [...(groups.get(key) ?? []), bucket]);
    }
    for (const [key, group] of groups) {
      const bounds = group.map((b) => parseFloatStrict(b.labels['le']!, `line ${b.line}`));
      for (let i = 1; i < group.length; i++) {
        if (!(bounds[i]! > bounds[i - 1]!)) throw new Error(`line ${group[i]!.line}: ${family} buckets out of order`);
        if (group[i]!.value < group[i - 1]!.value) throw new Error(`line ${group[i]!.line}: ${family} buckets not cumulative`);
      }
      if (bounds.at(-1) !== Infinity) throw new Error(`${family}${key}: no le="+Inf" bucket`);
      const labels = Object.fromEntries(JSON.parse(key) as [string, string][]);
      const count = samples.find((s) => s.name === `${family}_count` && sameLabels(s.labels, labels));
      const sum = samples.find((s) => s.name === `${family}_sum` && sameLabels(s.labels, labels));
      if (!count || !sum) throw new Error(`${family}${key}: missing _count or _sum`);
      if (count.value !== group.at(-1)!.value)
        throw new Error(`${family}${key}: _count ${count.value} ≠ +Inf bucket ${group.at(-1)!.value}`);
    }
  }
}

function sameLabels(a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): boolean {
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => a[k] === b[k]);
}

/** Sum of every sample named `name` whose labels include `labels` (0 when there is none). */
function total(exposition: Exposition, name: string, labels: Record<string, string> = {}): number {
  return exposition.samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}

function has(exposition: Exposition, name: string, labels: Record<string, string> = {}): boolean {
  return exposition.samples.some((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
}

// ---- the tests ----

describe('the parser itself', () => {
  it('accepts a well-formed exposition and rejects broken ones', () => {
    const good = [
      '# HELP a_total Things, with a \\\\ backslash',
      '# TYPE a_total counter',
      'a_total{x="1",y="q\\"uote"} 3',
      'a_total{x="2"} 1.5e3',
      '# TYPE g gauge',
      'g{k="nan"} Nan',
      'g{k="inf"} -Inf',
      '# TYPE h histogram',
      'h_bucket{le="0.1"} 1',
      'h_bucket{le="+Inf"} 2',
      'h_sum 0.3',
      'h_count 2',
      '',
    ].join('\n');
    const parsed = parseExposition(good);
    expect(total(parsed, 'a_total')).toBe(1503);
    expect(total(parsed, 'g', { k: 'nan' })).toBeNaN();
    expect(total(parsed, 'g', { k: 'inf' })).toBe(-Infinity);
    expect(parsed.samples.find((s) => s.labels['y'])?.labels['y']).toBe('q"uote');
    const bad = [
      '# TYPE a counter\na 1 2 3\n',
      '# TYPE a counter\na{x=1} 1\n',
      '# TYPE a counter\na one\n',
      '# TYPE a counter\na 0x1p3\n',
      '# TYPE a counter\na 1,5\n',
      'a 1\n',
      '# TYPE 1a counter\n',
      '# TYPE a countr\n',
      '# TYPE a counter\na 1\na 2\n',
      '# TYPE a counter\na -1\n',
      '# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n',
      '# TYPE a counter\na 1',
      '# HELP a bad \\x escape\n# TYPE a counter\na 1\n',
    ];
    for (const text of bad) expect(() => parseExposition(text), JSON.stringify(text)).toThrow();
  });
});

describe('GET /schema and GET /metrics', () => {
  let runtime: Runtime;
  let client: ArclightClient | undefined;

  const metrics = async (): Promise<Exposition> => {
    const response = await fetch(`${runtime.url}/metrics`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    return parseExposition(await response.text());
  };

  const waitForMetrics = async (predicate: (e: Exposition) => boolean, timeoutMs: number, what: string): Promise<Exposition> => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const exposition = await metrics();
      if (predicate(exposition)) return exposition;
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };

  beforeAll(async () => {
    runtime = await startRuntime({
      model: pattern as never,
      port: 0,
      host: '127.0.0.1',
      ice: { hostAddresses: ['127.0.0.1'] },
      playground: false,
      reconnectGraceSeconds: 600,
      logger: createLogger({}, 'warn'),
    });
    await runtime.loaded;
  });

  afterAll(async () => {
    await client?.disconnect().catch(() => {});
    await runtime?.close();
    await new Promise((resolve) => setTimeout(resolve, 200));
  });

  it('GET /schema is a valid OpenAPI 3.1 document', async () => {
    const response = await fetch(`${runtime.url}/schema`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/application\/json/);
    const doc = (await response.json()) as Record<string, unknown>;
    const validator = new Validator();
    const result = await validator.validate(doc);
    expect(result.errors, JSON.stringify(result.errors, null, 2)?.slice(0, 4_000)).toBeUndefined();
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
    expect(doc['openapi']).toMatch(/^3\.1\.\d+$/);

    // Every local $ref points at something.
    const refs: string[] = [];
    const walk = (node: unknown): void => {
      if (Array.isArray(node)) node.forEach(walk);
      else if (node && typeof node === 'object') {
        for (const [key, value] of Object.entries(node)) {
          if (key === '$ref' && typeof value === 'string') refs.push(value);
          else walk(value);
        }
      }
    };
    walk(doc);
    expect(refs.length).toBeGreaterThan(0);
    for (const ref of refs) {
      expect(ref, 'only local refs').toMatch(/^#\//);
      const target = ref
        .slice(2)
        .split('/')
        .reduce<unknown>(
          (node, part) => (node as Record<string, unknown> | undefined)?.[part.replaceAll('~1', '/').replaceAll('~0', '~')],
          doc,
        );
      expect(target, `${ref} resolves`).toBeTypeOf('object');
    }

    // The runtime's own endpoints are described.
    const paths = doc['paths'] as Record<string, Record<string, unknown>>;
    for (const path of [
      '/health',
      '/metrics',
      '/schema',
      '/capabilities',
      '/start_session',
      '/stop_session',
      '/sessions/{sid}',
      '/sessions/{sid}/transport/webrtc/connections/{cid}/sdp_params',
    ]) {
      expect(paths, path).toHaveProperty([path]);
    }
  });

  it('GET /schema describes every pattern command, the tracks and the fps', async () => {
    const doc = (await (await fetch(`${runtime.url}/schema`)).json()) as {
      info: { title: string; version: string };
      components: {
        requestBodies: Record<string, { content: { 'application/json': { schema: unknown } } }>;
        responses: Record<string, { content?: { 'application/json': { schema: unknown } } }>;
      };
      'x-arclight': {
        fps: number;
        model: { name: string; version: string | null };
        tracks: { name: string; kind: string; direction: string; width?: number; height?: number }[];
        commands: Record<string, { requestBody: { $ref: string }; response: { $ref: string }; reply_type?: string; description?: string }>;
      };
    };
    // Read by name from the document: the plain map type, not the model's literal command types.
    const commands: CommandMap<never> = pattern.commands!;
    const names = Object.keys(commands);
    expect(names).toEqual(expect.arrayContaining(['set_color', 'set_speed', 'set_text', 'set_tone', 'get_state']));
    expect(Object.keys(doc['x-arclight'].commands).sort()).toEqual([...names].sort());
    expect(Object.keys(doc.components.requestBodies).sort()).toEqual([...names].sort());
    for (const name of names) {
      const spec = commands[name]!;
      expect(doc.components.requestBodies[name]!.content['application/json'].schema, name).toEqual(spec.params);
      const entry = doc['x-arclight'].commands[name]!;
      expect(entry.requestBody).toEqual({ $ref: `#/components/requestBodies/${name}` });
      expect(entry.response).toEqual({ $ref: `#/components/responses/${name}` });
      expect(entry.description).toBe(spec.description);
      expect(doc.components.responses).toHaveProperty([name]);
    }
    // Replies: set_color declares color_changed with a schema.
    expect(doc['x-arclight'].commands['set_color']!.reply_type).toBe('color_changed');
    expect(doc.components.responses['set_color']!.content!['application/json'].schema).toEqual(commands['set_color']!.reply!.schema);
    // set_speed declares no reply: it is acknowledged without a body, and no reply type is advertised.
    expect(doc['x-arclight'].commands['set_speed']!.reply_type).toBeUndefined();
    expect(doc.components.responses['set_speed']!.content).toBeUndefined();

    expect(doc['x-arclight'].fps).toBe(30);
    expect(doc['x-arclight'].model).toEqual({ name: 'pattern', version: '1.0.0' });
    expect(doc.info.version).toBe('1.0.0');
    expect(doc.info.title).toContain('pattern');
    expect(doc['x-arclight'].tracks).toEqual([
      { name: 'main_video', kind: 'video', direction: 'recvonly', width: 1280, height: 720 },
      { name: 'tone', kind: 'audio', direction: 'recvonly', sample_rate: 48_000, channels: 1 },
    ]);
  });

  it('GET /metrics parses as Prometheus text before any session', async () => {
    const exposition = await metrics();
    for (const name of [
      'arclight_sessions',
      'arclight_sessions_started_total',
      'arclight_connections',
      'arclight_commands_total',
      'arclight_frames_emitted_total',
      'arclight_frames_sent_total',
      'arclight_encode_duration_seconds',
      'arclight_video_emit_to_send_seconds',
      'arclight_webrtc_connect_seconds',
    ]) {
      expect(exposition.types.has(name), `TYPE ${name}`).toBe(true);
      expect(exposition.help.get(name), `HELP ${name}`).toBeTruthy();
    }
    expect(exposition.types.get('arclight_commands_total')).toBe('counter');
    expect(exposition.types.get('arclight_connections')).toBe('gauge');
    expect(exposition.types.get('arclight_encode_duration_seconds')).toBe('histogram');
    expect(total(exposition, 'arclight_connections')).toBe(0);
    expect(total(exposition, 'arclight_sessions')).toBe(0);
    expect(total(exposition, 'arclight_webrtc_connect_seconds_count')).toBe(0);
  });

  it('GET /metrics moves while frames flow, and connections go 1 → 0', async () => {
    const before = await metrics();
    client = new ArclightClient({
      modelName: 'pattern',
      local: true,
      localRuntimeUrl: runtime.url,
      commandTimeoutMs: 20_000,
      connectTimeoutMs: 20_000,
    });
    await client.connect(undefined, { maxAttempts: 10 });

    const connected = await waitForMetrics((e) => total(e, 'arclight_connections') === 1, 15_000, 'arclight_connections = 1');
    expect(total(connected, 'arclight_sessions')).toBe(1);
    expect(total(connected, 'arclight_sessions_started_total')).toBe(total(before, 'arclight_sessions_started_total') + 1);
    expect(total(connected, 'arclight_webrtc_connect_seconds_count')).toBeGreaterThanOrEqual(1);
    expect(total(connected, 'arclight_webrtc_connect_seconds_sum')).toBeGreaterThan(0);

    const colors = ['#ff0000', '#00ff00', '#0000ff'];
    for (const color of colors) {
      expect(await client.sendCommand('set_color', { color })).toEqual({ type: 'color_changed', data: { color } });
    }
    await client.sendCommand('set_speed', { speed: 2 }); // an ack, not a reply
    await client.sendCommand('set_color', { color: 'nope' }).catch(() => {}); // invalid_params

    const start = connected;
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const after = await waitForMetrics(
      (e) =>
        total(e, 'arclight_frames_sent_total') > total(start, 'arclight_frames_sent_total') &&
        total(e, 'arclight_encode_duration_seconds_count') > 0 &&
        // About 60 frames at 30 fps in 2 s; a busy 2-core machine may lag, so allow time.
        total(e, 'arclight_frames_emitted_total', { track: 'main_video' }) -
          total(start, 'arclight_frames_emitted_total', { track: 'main_video' }) >=
          10,
      15_000,
      'frames sent and encoded',
    );

    const emitted = (e: Exposition) => total(e, 'arclight_frames_emitted_total', { track: 'main_video' });
    expect(has(after, 'arclight_frames_emitted_total', { track: 'main_video' })).toBe(true);
    expect(emitted(after)).toBeGreaterThan(emitted(start));
    expect(emitted(after) - emitted(start)).toBeGreaterThanOrEqual(10);
    expect(total(after, 'arclight_frames_sent_total')).toBeGreaterThan(total(start, 'arclight_frames_sent_total'));
    expect(total(after, 'arclight_encode_duration_seconds_count')).toBeGreaterThan(0);
    // One emit-to-send observation per frame sent to the one viewer.
    expect(total(after, 'arclight_video_emit_to_send_seconds_count', { track: 'main_video' })).toBeGreaterThan(0);
    expect(total(after, 'arclight_commands_total', { command: 'set_color', outcome: 'reply' })).toBe(
      total(before, 'arclight_commands_total', { command: 'set_color', outcome: 'reply' }) + colors.length,
    );
    expect(total(after, 'arclight_commands_total', { command: 'set_speed', outcome: 'ack' })).toBe(1);
    expect(total(after, 'arclight_commands_total', { command: 'set_color', outcome: 'invalid_params' })).toBe(1);
    expect(total(after, 'arclight_command_duration_seconds_count', { command: 'set_color' })).toBe(colors.length + 1);
    expect(total(after, 'arclight_connections')).toBe(1);

    await client.disconnect();
    client = undefined;
    const gone = await waitForMetrics(
      (e) => total(e, 'arclight_connections') === 0 && total(e, 'arclight_sessions') === 0,
      15_000,
      'arclight_connections = 0',
    );
    expect(total(gone, 'arclight_connections')).toBe(0);
    // Counters never go back.
    expect(emitted(gone)).toBeGreaterThanOrEqual(emitted(after));
    expect(total(gone, 'arclight_webrtc_connect_seconds_count')).toBeGreaterThanOrEqual(1);
  });
});
