/**
 * Data-channel input fuzzing (issue 8 part 1), over a real WebRTC data channel on 127.0.0.1: each
 * declared command of a counting model (test/fixtures/command-counter-model.ts) gets generated bad
 * params (wrong types, missing/extra fields, huge strings, NaN, out-of-range numbers, `__proto__`
 * keys, 10,000-deep nesting), and the channel gets malformed frames (not JSON, binary, over the
 * message limit, broken envelopes). Each gets a `command_failed` with a code from ERROR_CODES —
 * correlated by `request_id` whenever one can be read — the handlers run 0 times, and afterwards
 * the session is connected, /health answers and a valid command still runs.
 *
 * test/e2e/bad-input.test.ts holds the hand-written cases (one per error code); this file adds the
 * generated ones. FUZZ_RUNS sets the count per property (fuzz-support.ts, docs/reliability.md).
 */

import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../../protocol/errors.ts';
import type { Envelope } from '../../protocol/messages.ts';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import model, { commandCalls } from '../fixtures/command-counter-model.ts';
import { openRawPeer, type RawPeer } from '../support/raw-peer.ts';
import { FUZZ_TIMEOUT_MS, anyValue, badObject, fuzzParams, isObject } from './fuzz-support.ts';

const MESSAGE_LIMIT = 4096;
const FAILURE_CODES = ['invalid_params', 'invalid_message', 'message_too_large', 'unknown_command'];

const isInt = (v: unknown, min: number, max: number) => typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max;
const isStr = (v: unknown, max: number, min = 1) => typeof v === 'string' && v.length >= min && v.length <= max;

/** Each declared command: a valid params object and what each field accepts (mirrors its schema). */
const COMMANDS: Record<string, { valid: Record<string, unknown>; accepts: Record<string, (v: unknown) => boolean>; required: string[] }> = {
  set_level: { valid: { level: 5 }, accepts: { level: (v) => isInt(v, 0, 100) }, required: ['level'] },
  set_label: {
    valid: { label: 'hi' },
    accepts: {
      label: (v) => isStr(v, 32),
      tags: (v) => v === undefined || (Array.isArray(v) && v.length <= 4 && v.every((t) => isStr(t, 16, 0))),
    },
    required: ['label'],
  },
  configure: {
    valid: { mode: 'fast' },
    accepts: {
      mode: (v) => v === 'fast' || v === 'slow',
      ratio: (v) => v === undefined || (typeof v === 'number' && v >= 0 && v <= 1),
      nested: (v) => v === undefined || (isObject(v) && Object.keys(v).every((k) => k === 'x') && isInt(v['x'], -(2 ** 53), 2 ** 53)),
    },
    required: ['mode'],
  },
};

const counts = () => Object.fromEntries(Object.entries(commandCalls).map(([name, calls]) => [name, calls.length]));
const figures = { params: 0, frames: 0, correlated: 0, uncorrelated: 0 };

describe('command fuzzing over the data channel', () => {
  let runtime: Runtime;
  let peer: RawPeer;
  let rid = 0;
  const nextId = () => `fz-${++rid}`;

  beforeAll(async () => {
    runtime = await startRuntime({
      model: model as never,
      port: 0,
      host: '127.0.0.1',
      ice: { hostAddresses: ['127.0.0.1'] },
      playground: false,
      maxMessageBytes: MESSAGE_LIMIT,
      reconnectGraceSeconds: 600,
    });
    await runtime.loaded;
    const started = await fetch(`${runtime.url}/start_session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expect(started.status).toBe(200);
    const sessionId = ((await started.json()) as { session_id: string }).session_id;
    peer = await openRawPeer(runtime.url, sessionId);
    await peer.waitFor((m) => m.scope === 'runtime' && m.data.type === 'connection_info', 15_000);
  });

  afterAll(async () => {
    peer?.close();
    await runtime?.close();
    await new Promise((resolve) => setTimeout(resolve, 200));
    console.info(`command fuzzing: ${JSON.stringify(figures)}`);
  });

  /**
   * Sends one frame and waits for its `command_failed`: the one carrying `requestId`, or (none
   * readable) the next uncorrelated one. Nothing else may answer it (no reply, no ack).
   */
  async function expectFailure(
    frame: string | Uint8Array,
    requestId: string | undefined,
    context: string,
  ): Promise<{ code: string; command: string }> {
    const from = peer.messages.length;
    if (typeof frame === 'string') peer.sendRaw(frame);
    else peer.channel.send(frame as unknown as ArrayBuffer);
    const envelope: Envelope = await peer.waitFor(
      (m) =>
        m.data.request_id === requestId && (m.data.type === 'command_failed' || m.data.type === 'command_ack' || m.scope === 'application'),
      15_000,
      from,
    );
    expect(envelope.scope, context).toBe('runtime');
    expect(envelope.data.type, `${context} → ${JSON.stringify(envelope).slice(0, 300)}`).toBe('command_failed');
    const data = envelope.data.data as { code: string; message: string; command: string; field?: string };
    expect(Object.hasOwn(ERROR_CODES, data.code), context).toBe(true);
    expect(FAILURE_CODES, `${context} → ${data.code}`).toContain(data.code);
    expect(data.message, context).toBeTypeOf('string');
    if (requestId === undefined) figures.uncorrelated++;
    else figures.correlated++;
    return data;
  }

  const sendCommand = (type: string, params: unknown, requestId: string) =>
    JSON.stringify({ scope: 'application', data: { type, data: params, request_id: requestId } });

  for (const [name, spec] of Object.entries(COMMANDS)) {
    it(`${name}: generated bad params → correlated invalid_params, handler not called`, { timeout: FUZZ_TIMEOUT_MS }, async () => {
      const before = counts();
      await fc.assert(
        fc.asyncProperty(
          fc.oneof(
            { weight: 3, arbitrary: badObject(spec.valid, spec.accepts, spec.required) as fc.Arbitrary<unknown> },
            // Not an object at all (undefined drops `data`: params missing).
            { weight: 1, arbitrary: anyValue.filter((v) => !isObject(JSON.parse(JSON.stringify(v ?? null)) as unknown)) },
          ),
          async (params) => {
            const id = nextId();
            const text = sendCommand(name, params, id);
            figures.params++;
            const failure = await expectFailure(text, id, `${name} ${text.slice(0, 200)}`);
            expect(failure.command).toBe(name);
            if (Buffer.byteLength(text) <= MESSAGE_LIMIT) expect(failure.code, text.slice(0, 200)).toBe('invalid_params');
            else expect(failure.code).toBe('message_too_large');
          },
        ),
        fuzzParams(),
      );
      // Fixed hostile params: raw NaN is not JSON; deep nesting and prototype keys are.
      const hostile: Array<[string, string | undefined]> = [
        [`{"scope":"application","data":{"type":"${name}","data":{"${spec.required[0]}":NaN},"request_id":"__ID__"}}`, undefined],
        [`{"scope":"application","data":{"type":"${name}","data":${'['.repeat(10_000)}${']'.repeat(10_000)},"request_id":"__ID__"}}`, 'id'],
        [
          `{"scope":"application","data":{"type":"${name}","data":{"__proto__":${JSON.stringify(spec.valid)}},"request_id":"__ID__"}}`,
          'id',
        ],
        [
          `{"scope":"application","data":{"type":"${name}","data":{"constructor":{"prototype":${JSON.stringify(spec.valid)}}},"request_id":"__ID__"}}`,
          'id',
        ],
        [
          `{"scope":"application","data":{"type":"${name}","data":{"${spec.required[0]}":${'{"a":'.repeat(1000)}1${'}'.repeat(1000)}},"request_id":"__ID__"}}`,
          'id',
        ],
      ];
      for (const [template, correlated] of hostile) {
        const id = nextId();
        await expectFailure(template.replace('__ID__', id), correlated ? id : undefined, `${name} ${template.slice(0, 120)}`);
        figures.params++;
      }
      expect(counts()).toEqual(before);
      expect(({} as Record<string, unknown>)['level']).toBeUndefined();
    });
  }

  it(
    'malformed frames (not JSON, binary, oversized, broken envelopes) → a failure each, no handler call',
    { timeout: FUZZ_TIMEOUT_MS },
    async () => {
      const before = counts();
      const notJson = fc.string({ maxLength: 200 }).filter((s) => {
        try {
          JSON.parse(s);
          return false;
        } catch {
          return true;
        }
      });
      const brokenEnvelope = fc
        .record({
          scope: fc.oneof(fc.constantFrom('application', 'runtime'), anyValue),
          type: fc.oneof(fc.constantFrom(...Object.keys(COMMANDS)), anyValue),
          data: anyValue,
          extra: fc.dictionary(fc.constantFrom('__proto__', 'constructor', 'uploads', 'x'), anyValue, { maxKeys: 2 }),
          requestId: fc.oneof(fc.constant('ok'), anyValue),
          shape: fc.constantFrom('normal', 'data-not-object', 'no-data', 'array'),
        })
        .map(({ scope, type, data, extra, requestId, shape }) => {
          const id = requestId === 'ok' ? nextId() : requestId;
          const body: Record<string, unknown> = { type, data, request_id: id };
          for (const [k, v] of Object.entries(extra))
            Object.defineProperty(body, k, { value: v, enumerable: true, configurable: true, writable: true });
          if (shape === 'data-not-object') return { value: { scope, data: [body] } as unknown };
          if (shape === 'no-data') return { value: { scope, request_id: id } as unknown };
          if (shape === 'array') return { value: [{ scope, data: body }] as unknown };
          return { value: { scope, data: body } as unknown };
        })
        .filter(({ value }) => {
          // Keep only envelopes the schema refuses (or that name no valid command with valid params).
          const v = JSON.parse(JSON.stringify(value)) as unknown;
          if (!isObject(v) || !isObject(v['data'])) return true;
          if (v['scope'] !== 'application' && v['scope'] !== 'runtime') return true;
          const d = v['data'];
          if (typeof d['type'] !== 'string' || d['type'].length === 0 || d['type'].length > 128) return true;
          if (v['scope'] === 'runtime') return false; // runtime messages (ping…) may be valid: not ours here
          if (d['uploads'] !== undefined) return false;
          const spec = COMMANDS[d['type']];
          if (!spec) return true; // unknown command
          const params = d['data'];
          return !(
            isObject(params) &&
            spec.required.every((k) => Object.hasOwn(params, k)) &&
            Object.keys(params).every((k) => spec.accepts[k]?.(params[k]))
          );
        });
      const frame = fc.oneof(
        notJson.map((text) => ({ frame: text as string | Uint8Array, id: undefined as string | undefined })),
        fc
          .uint8Array({ minLength: 1, maxLength: 512 })
          .map((bytes) => ({ frame: bytes as string | Uint8Array, id: undefined as string | undefined })),
        fc
          .integer({ min: MESSAGE_LIMIT + 1, max: 200_000 })
          .map((n) => ({ frame: 'x'.repeat(n) as string | Uint8Array, id: undefined as string | undefined })),
        fc.integer({ min: MESSAGE_LIMIT + 1, max: 200_000 }).map((n) => {
          const id = nextId();
          return {
            frame: sendCommand('set_level', { level: 5, pad: 'p'.repeat(n) }, id) as string | Uint8Array,
            id: id as string | undefined,
          };
        }),
        brokenEnvelope.map(({ value }) => {
          const text = JSON.stringify(value);
          const id = value as { data?: { request_id?: unknown } } | unknown[] | null;
          const readable =
            !Array.isArray(id) &&
            isObject(id) &&
            isObject(id['data']) &&
            typeof id['data']['request_id'] === 'string' &&
            id['data']['request_id'].length >= 1 &&
            id['data']['request_id'].length <= 64
              ? (id['data']['request_id'] as string)
              : undefined;
          return { frame: text as string | Uint8Array, id: readable };
        }),
      );
      await fc.assert(
        fc.asyncProperty(frame, async ({ frame: f, id }) => {
          figures.frames++;
          const context = typeof f === 'string' ? f.slice(0, 200) : `binary ${Buffer.from(f).toString('hex', 0, 40)}`;
          // A binary frame that happens to decode to JSON with a request_id is correlated by it.
          let expected = id;
          if (typeof f !== 'string') {
            try {
              const parsed = JSON.parse(Buffer.from(f).toString('utf8')) as { data?: { request_id?: unknown } };
              const candidate = parsed?.data?.request_id;
              if (typeof candidate === 'string' && candidate.length >= 1 && candidate.length <= 64) expected = candidate;
            } catch {
              // not JSON: uncorrelated
            }
          }
          await expectFailure(f, expected, context);
        }),
        fuzzParams(4 * Math.max(1, Math.round(Number(process.env['FUZZ_RUNS'] ?? 40)))),
      );
      expect(counts()).toEqual(before);
    },
  );

  it('afterwards: connected, /health 200, each command runs once for one valid call', { timeout: FUZZ_TIMEOUT_MS }, async () => {
    expect(peer.pc.connectionState).toBe('connected');
    expect(peer.channel.readyState).toBe('open');
    expect((await fetch(`${runtime.url}/health`)).status).toBe(200);
    const before = counts();
    for (const [name, spec] of Object.entries(COMMANDS)) {
      const id = nextId();
      const from = peer.messages.length;
      peer.sendRaw(sendCommand(name, spec.valid, id));
      const outcome = await peer.waitFor((m) => m.data.request_id === id, 15_000, from);
      expect(outcome.data.type, JSON.stringify(outcome)).not.toBe('command_failed');
      expect(commandCalls[name]!.length).toBe(before[name]! + 1);
      expect(commandCalls[name]!.at(-1)).toEqual(spec.valid);
    }
    expect(peer.unparsed).toEqual([]);
  });
});
