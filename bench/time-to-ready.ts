/**
 * Time to ready, broken down (issue 26): `connect()` → ready → first decoded frame, step by step,
 * for our Node client and for @reactor-team/js-sdk 2.9.0 (Node + wrtc), local and through the
 * coordinator, and our browser client in Chromium (local, in a network namespace:
 * bench/support/chromium-connect.ts), beside the floor of the same stack — a bare wrtc peer connecting to a werift peer
 * built as the runtime builds them (runtime/transport/signalling/peer-factory.ts), in this process, with no
 * HTTP and no session.
 *
 *   node --conditions=source --import tsx bench/time-to-ready.ts [--rounds 10] [--configs floor,floor-first-candidate,node-local,node-hosted,sdk-local,sdk-hosted,chromium-local] [--pause-ms 1500] [--json out.json]
 *   node --conditions=source --import tsx bench/time-to-ready.ts --render out.json              # a saved run's tables again
 *   node --conditions=source --import tsx bench/time-to-ready.ts --compare before.json,after.json  # markdown, side by side
 *
 * Servers are child processes on 127.0.0.1, as an operator runs them (bench/support/child-runtime.ts,
 * soak-stack.ts): one local runtime (`arclight serve models/examples/pattern`) and one hosted stack
 * (coordinator + runtime registered with it). Each connect opens a fresh session (and each
 * disconnect ends it), so "session start" is in every figure. The configurations take turns round
 * by round, so they see the same machine load. Before the measured rounds each configuration
 * connects once (its figures are reported apart as the process's first connect).
 *
 * Steps come from outside the client (bench/support/connect-timeline.ts: a pass-through fetch and
 * an RTCPeerConnection wrapper — the same for both clients) and from the runtime's session log
 * (`connection ready` → `steps`, runtime/session/connect-timings.ts), on one wall clock.
 */

import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import type { Reactor as ReactorType, ReactorStatus } from '@reactor-team/js-sdk';
import { ArclightClient, wrtc } from '../client/node.ts';
import type { RtcImplementation } from '../client/peer-link.ts';
import { createRuntimePeer } from '../runtime/transport/signalling/peer-factory.ts';
import { IcePolicy } from '../runtime/transport/signalling/ice-policy.ts';
import { answerOffer } from '../runtime/transport/signalling/answer-offer.ts';
import type { TrackCapability } from '../protocol/capabilities.ts';
import { startChildRuntime, type ChildRuntime } from './support/child-runtime.ts';
import {
  beginConnect,
  endConnect,
  instrumentedPeerConnection,
  instrumentFetch,
  runtimeSteps,
  ConnectTimeline,
  type VideoSinkConstructor,
} from './support/connect-timeline.ts';
import { loadavg, sleep, summarise } from './support/measure.ts';
import { finishReport, runBench, runInfo } from './support/report.ts';
import { startSoakStack, type SoakStack } from './support/soak-stack.ts';
import { startChromiumRig, type ChromiumRig } from './support/chromium-connect.ts';
import { networkNamespaceUnavailableReason } from '../test/support/netns.ts';

const HOST = '127.0.0.1';
const CONFIGS = ['floor', 'floor-first-candidate', 'node-local', 'node-hosted', 'sdk-local', 'sdk-hosted', 'chromium-local'] as const;
type Config = (typeof CONFIGS)[number];
/** Chromium needs a network namespace (root, iproute2): in the default set only where one can be made. */
const DEFAULT_CONFIGS = CONFIGS.filter((c) => c !== 'chromium-local' || networkNamespaceUnavailableReason() === null);

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '10' },
    configs: { type: 'string', default: DEFAULT_CONFIGS.join(',') },
    json: { type: 'string' },
    /** Print a saved `--json` run with this version's table, measuring nothing. */
    render: { type: 'string' },
    /** `before.json,after.json` (either may pool runs: `a.json+b.json`): side by side as markdown tables, measuring nothing. */
    compare: { type: 'string' },
    /** Pause between connects, for the previous session to end everywhere (a hosted runtime has one slot). */
    'pause-ms': { type: 'string', default: '1500' },
  },
});
const ROUNDS = Number(args.rounds);
const PAUSE_MS = Number(args['pause-ms']);
const SELECTED = args.configs.split(',').map((c) => c.trim()) as Config[];
for (const c of SELECTED) if (!CONFIGS.includes(c)) throw new Error(`unknown config "${c}"; known: ${CONFIGS.join(', ')}`);

const VideoSink = (wrtc as unknown as { nonstandard: { RTCVideoSink: VideoSinkConstructor } }).nonstandard.RTCVideoSink;
const InstrumentedPC = instrumentedPeerConnection(wrtc.RTCPeerConnection as unknown as typeof RTCPeerConnection, VideoSink);
const instrumentedRtc: RtcImplementation = {
  RTCPeerConnection: InstrumentedPC,
  MediaStream: wrtc.MediaStream as unknown as typeof MediaStream,
};

// js-sdk sees only the globals, as in a browser.
const g = globalThis as Record<string, unknown>;
g.RTCPeerConnection = InstrumentedPC;
g.RTCSessionDescription = wrtc.RTCSessionDescription;
g.RTCIceCandidate = wrtc.RTCIceCandidate;
g.MediaStream = wrtc.MediaStream;
g.MediaStreamTrack = wrtc.MediaStreamTrack;
console.debug = () => {}; // js-sdk logs every poll
instrumentFetch();

// ---------------------------------------------------------------------------
// one connect per configuration
// ---------------------------------------------------------------------------

interface Servers {
  local?: ChildRuntime;
  hosted?: SoakStack;
  chromium?: ChromiumRig;
}

/** Waits for `name` in the timeline (the first decoded frame comes after ready). */
async function waitMark(timeline: ConnectTimeline, name: string, timeoutMs: number): Promise<void> {
  const until = performance.now() + timeoutMs;
  while (!timeline.marks.has(name) && performance.now() < until) await sleep(5);
}

async function connectNode(servers: Servers, hosted: boolean): Promise<ConnectTimeline> {
  const token = hosted ? await servers.hosted!.mintToken() : undefined;
  const client = new ArclightClient(
    hosted
      ? { modelName: 'pattern', apiUrl: servers.hosted!.coordinatorUrl, rtc: instrumentedRtc }
      : { modelName: 'pattern', local: true, localRuntimeUrl: servers.local!.url, rtc: instrumentedRtc },
  );
  const timeline = beginConnect();
  client.on('statusChanged', (status) => status === 'ready' && timeline.mark('ready'));
  try {
    await client.connect(token);
    timeline.mark('connect_resolved');
    await waitMark(timeline, 'first_model_frame', 5_000);
    const base = hosted ? servers.hosted!.coordinatorUrl : servers.local!.url;
    const steps = await runtimeSteps(base, client.getSessionId()!, token ? `Bearer ${token}` : undefined, client.getConnectionId());
    for (const [name, at] of steps?.marks ?? []) timeline.mark(name, at);
  } finally {
    endConnect();
    await client.disconnect().catch(() => {});
  }
  return timeline;
}

let Reactor: typeof ReactorType | undefined;

async function connectSdk(servers: Servers, hosted: boolean): Promise<ConnectTimeline> {
  Reactor ??= (await import('@reactor-team/js-sdk')).Reactor;
  const token = hosted ? await servers.hosted!.mintToken() : undefined;
  const reactor = hosted
    ? new Reactor({ modelName: 'pattern', apiUrl: servers.hosted!.coordinatorUrl })
    : new Reactor({ modelName: 'pattern', local: true, apiUrl: servers.local!.url });
  const timeline = beginConnect();
  reactor.on('statusChanged', (status: ReactorStatus) => status === 'ready' && timeline.mark('ready'));
  try {
    await reactor.connect(token);
    timeline.mark('connect_resolved');
    await waitMark(timeline, 'ready', 20_000);
    if (!timeline.marks.has('ready')) throw new Error(`js-sdk did not become ready (status ${reactor.getStatus()})`);
    await waitMark(timeline, 'first_model_frame', 5_000);
    const base = hosted ? servers.hosted!.coordinatorUrl : servers.local!.url;
    const steps = await runtimeSteps(base, reactor.getSessionId()!, token ? `Bearer ${token}` : undefined);
    for (const [name, at] of steps?.marks ?? []) timeline.mark(name, at);
  } finally {
    endConnect();
    await reactor.disconnect().catch(() => {});
  }
  return timeline;
}

const FLOOR_TRACKS: readonly TrackCapability[] = [{ name: 'main_video', kind: 'video', direction: 'recvonly', width: 1280, height: 720 }];

/**
 * wrtc (as our client lays out its peer: channel, then a recvonly video transceiver) ↔ a werift
 * peer answering as the runtime does (answerOffer, peer-factory) on loopback, in this process.
 * `firstCandidate`: the offer goes at the client's first candidate (as our client sends it now),
 * not once gathering completes (as 2.9.0 and our client before issue 26 did).
 */
async function connectFloor(firstCandidate: boolean): Promise<ConnectTimeline> {
  const timeline = beginConnect();
  const policy = new IcePolicy({ hostAddresses: [HOST] });
  const server = createRuntimePeer({ icePolicy: policy, iceServers: [] });
  const client = new InstrumentedPC({ iceServers: [] });
  try {
    server.onDataChannel.subscribe((channel) => {
      channel.stateChanged.subscribe((state) => state === 'open' && timeline.mark('rt_channel_open'));
      if (channel.readyState === 'open') timeline.mark('rt_channel_open');
    });
    server.iceConnectionStateChange.subscribe((state) => state === 'connected' && timeline.mark('rt_ice_connected'));
    server.connectionStateChange.subscribe((state) => state === 'connected' && timeline.mark('rt_dtls_connected'));
    const channel = client.createDataChannel('data');
    client.addTransceiver('video', { direction: 'recvonly' });
    await client.setLocalDescription(await client.createOffer());
    await new Promise<void>((resolve) => {
      if (client.iceGatheringState === 'complete') return resolve();
      client.addEventListener('icegatheringstatechange', () => client.iceGatheringState === 'complete' && resolve());
      if (firstCandidate) client.addEventListener('icecandidate', () => resolve());
    });
    timeline.mark('rt_offer');
    const { answerSdp } = await answerOffer(server, client.localDescription!.sdp, FLOOR_TRACKS, undefined, policy, undefined, () =>
      timeline.mark('rt_offer_applied'),
    );
    timeline.mark('rt_answer_ready');
    await client.setRemoteDescription({ type: 'answer', sdp: answerSdp });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('floor: not connected in 10 s')), 10_000);
      const check = () => {
        if (client.connectionState === 'connected' && channel.readyState === 'open') {
          clearTimeout(timer);
          resolve();
        }
      };
      client.addEventListener('connectionstatechange', check);
      channel.addEventListener('open', check);
      check();
    });
    timeline.mark('ready');
  } finally {
    endConnect();
    client.close();
    await server.close().catch(() => {});
  }
  return timeline;
}

/** Our browser client in Chromium (bench/support/chromium-connect.ts), its page's stamps put on a timeline. */
async function connectChromium(rig: ChromiumRig): Promise<ConnectTimeline> {
  const r = await rig.connect();
  const timeline = new ConnectTimeline(r.t0);
  for (const [name, at] of Object.entries(r.marks)) timeline.mark(name, at);
  timeline.http.push(...r.http);
  const steps = await runtimeSteps(rig.runtime.url, r.sessionId, undefined, r.connectionId);
  for (const [name, at] of steps?.marks ?? []) timeline.mark(name, at + r.clockOffsetMs);
  return timeline;
}

function connectOnce(config: Config, servers: Servers): Promise<ConnectTimeline> {
  switch (config) {
    case 'floor':
      return connectFloor(false);
    case 'floor-first-candidate':
      return connectFloor(true);
    case 'node-local':
      return connectNode(servers, false);
    case 'node-hosted':
      return connectNode(servers, true);
    case 'sdk-local':
      return connectSdk(servers, false);
    case 'sdk-hosted':
      return connectSdk(servers, true);
    case 'chromium-local':
      return connectChromium(servers.chromium!);
  }
}

// ---------------------------------------------------------------------------
// the breakdown
// ---------------------------------------------------------------------------

/** One connect as figures: each step's duration and a few counts (ms). */
export type Breakdown = Record<string, number>;

/** The HTTP facts a breakdown needs, in ms from connect(): when the session call(s) ended, the offer's POST. */
interface HttpFacts {
  sessionDone: number;
  offerStart: number;
  offerEnd: number;
  answerGets: number;
  sessionPolls: number;
}

/** The end of the session call(s) before transport signalling: start_session, or POST /sessions and its polls. */
function httpFacts(t: ConnectTimeline): HttpFacts {
  const transportStart = t.call('ice_servers')?.start ?? Infinity;
  const ends = t.http
    .filter((c) => ['start_session', 'create_session', 'get_session'].includes(c.label) && c.start - t.t0 < transportStart)
    .map((c) => c.end - t.t0);
  const offer = t.call('send_offer');
  return {
    sessionDone: ends.length ? Math.max(...ends) : NaN,
    offerStart: offer?.start ?? NaN,
    offerEnd: offer?.end ?? NaN,
    answerGets: t.count('get_answer'),
    sessionPolls: t.count('get_session'),
  };
}

/**
 * The steps of one connect, each from the end of the one before (ms). ICE, DTLS and SCTP are
 * read on the runtime's side (its ICE `connected`, DTLS `connected`, channel open): libwebrtc
 * reports its ICE `connected` only with DTLS, so the client's own states cannot split them.
 */
function breakdown(config: Config, m: (name: string) => number, h: HttpFacts | undefined): Breakdown {
  const ready = m('ready');
  const network = {
    'ICE checks → pair nominated': m('rt_ice_connected') - m('answer_applied'),
    'DTLS handshake': m('rt_dtls_connected') - m('rt_ice_connected'),
    'SCTP + data channel open': m('rt_channel_open') - m('rt_dtls_connected'),
  };
  if (config === 'floor' || config === 'floor-first-candidate') {
    return {
      'offer + candidates (client)': m('rt_offer'),
      'answer (werift: apply offer, answer, gather)': m('rt_answer_ready') - m('rt_offer'),
      'apply answer (client)': m('answer_applied') - m('rt_answer_ready'),
      ...network,
      'runtime channel open → client ready': ready - m('rt_channel_open'),
      'total → ready': ready,
    };
  }
  const f = h ?? { sessionDone: NaN, offerStart: NaN, offerEnd: NaN, answerGets: NaN, sessionPolls: NaN };
  return {
    'session (HTTP; the model session starts)': f.sessionDone,
    'ice_servers + connection id (HTTP)': m('pc_created') - f.sessionDone,
    'offer + candidates (client)': f.offerStart - m('pc_created'),
    'POST sdp_params (runtime answers inside)': f.offerEnd - f.offerStart,
    '· runtime: apply offer, answer, gather': m('rt_answer_ready') - m('rt_offer'),
    'answer fetch (GET polls, waits)': m('answer_apply_start') - f.offerEnd,
    'apply answer (client)': m('answer_applied') - m('answer_apply_start'),
    ...network,
    'runtime ready → client ready': ready - m('rt_ready'),
    'total connect() → ready': ready,
    'ready → first decoded frame': m('first_frame') - ready,
    'ready → first model frame': m('first_model_frame') - ready,
    'GET sdp_params calls': f.answerGets,
    'GET /sessions polls': f.sessionPolls,
  };
}

const TOTAL_KEYS = ['total → ready', 'total connect() → ready'];
function total(b: Breakdown): number {
  return b[TOTAL_KEYS.find((k) => k in b)!]!;
}

// ---------------------------------------------------------------------------
// main
// ---------------------------------------------------------------------------

const fmt = (x: number): string => (Number.isNaN(x) ? '—' : x.toFixed(1));

function printTable(config: Config, rounds: Breakdown[], loads: string[]): void {
  process.stdout.write(`\n== ${config}: ${rounds.length} connects; loadavg at each: ${loads.join(' | ')} ==\n`);
  process.stdout.write(
    `${'step'.padEnd(46)} ${'median'.padStart(8)} ${'min'.padStart(8)} ${'p90'.padStart(8)} ${'max'.padStart(8)}   (ms)\n`,
  );
  const keys = Object.keys(rounds[0] ?? {});
  for (const key of keys) {
    const s = summarise(rounds.map((r) => r[key]!).filter((x) => !Number.isNaN(x)));
    const median = medianOf(rounds.map((r) => r[key]!).filter((x) => !Number.isNaN(x)));
    process.stdout.write(
      `${key.padEnd(46)} ${fmt(median).padStart(8)} ${fmt(s.min).padStart(8)} ${fmt(s.p90).padStart(8)} ${fmt(s.max).padStart(8)}\n`,
    );
  }
}

function medianOf(values: number[]): number {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** What one measured connect keeps: wall-clock marks relative to connect(), and the HTTP facts. */
interface RoundRecord {
  marks: Record<string, number>;
  http?: HttpFacts;
  loadavg: string;
}
type Results = Partial<Record<Config, { first: RoundRecord; rounds: RoundRecord[] }>>;

function record(timeline: ConnectTimeline, load: string): RoundRecord {
  return {
    marks: Object.fromEntries([...timeline.marks].map(([k, v]) => [k, +(v - timeline.t0).toFixed(2)])),
    http: httpFacts(timeline),
    loadavg: load,
  };
}

function figuresOf(config: Config, r: RoundRecord): Breakdown {
  return breakdown(config, (name) => r.marks[name] ?? NaN, r.http);
}

function printResults(results: Results): void {
  for (const [config, r] of Object.entries(results) as Array<[Config, NonNullable<Results[Config]>]>) {
    process.stdout.write(
      `\n${config}: the process's first connect (a warm-up, not in the table): ready ${fmt(total(figuresOf(config, r.first)))} ms`,
    );
    printTable(
      config,
      r.rounds.map((x) => figuresOf(config, x)),
      r.rounds.map((x) => x.loadavg),
    );
  }
  process.stdout.write('\n');
}

/**
 * A saved run (`--json`) read back as this version's records. A run saved before the HTTP facts
 * were kept (the first BEFORE run) has them rebuilt from the figures it saved.
 */
function load(path: string): Results {
  const saved = JSON.parse(readFileSync(path, 'utf8')) as {
    results: Record<
      string,
      {
        rounds: Array<Record<string, number>> | RoundRecord[];
        marks?: Array<Record<string, number>>;
        loadavg?: string[];
        first?: RoundRecord;
      }
    >;
  };
  const results: Results = {};
  for (const [config, r] of Object.entries(saved.results) as Array<[Config, (typeof saved.results)[string]]>) {
    if (r.first) {
      results[config] = { first: r.first, rounds: r.rounds as RoundRecord[] };
      continue;
    }
    const rounds = (r.rounds as Array<Record<string, number>>).map((old, i): RoundRecord => {
      const marks = r.marks![i]!;
      const offerStart = (marks.pc_created ?? NaN) + (old['offer + gather (client)'] ?? NaN);
      return {
        marks,
        loadavg: r.loadavg![i]!,
        http: {
          sessionDone: old['session (HTTP, model session start)'] ?? NaN,
          offerStart,
          offerEnd: offerStart + (old['POST sdp_params (runtime answers)'] ?? NaN),
          answerGets: old['GET sdp_params calls'] ?? NaN,
          sessionPolls: old['GET /sessions polls'] ?? NaN,
        },
      };
    });
    results[config] = { first: { marks: {}, loadavg: '' }, rounds };
  }
  return results;
}

/** `median (min–max)` of one step over a run's rounds, ms. */
function cell(config: Config, rounds: readonly RoundRecord[] | undefined, key: string): string {
  const values = (rounds ?? []).map((r) => figuresOf(config, r)[key]!).filter((x) => x !== undefined && !Number.isNaN(x));
  if (values.length === 0) return '—';
  const whole = key.startsWith('GET ');
  const f = (x: number) => (whole ? x.toFixed(0) : x.toFixed(1));
  return `${f(medianOf(values))} (${f(Math.min(...values))}–${f(Math.max(...values))})`;
}

/** Saved runs (`a.json+b.json`: their rounds pooled) read back as one. */
function loadPooled(paths: string): Results {
  const pooled: Results = {};
  for (const path of paths.split('+')) {
    for (const [config, r] of Object.entries(load(path)) as Array<[Config, NonNullable<Results[Config]>]>) {
      const into = (pooled[config] ??= { first: r.first, rounds: [] });
      into.rounds.push(...r.rounds);
    }
  }
  return pooled;
}

/** Two sets of saved runs side by side, a markdown table per configuration: median (min–max) per step. */
function compare(beforePaths: string, afterPaths: string): void {
  const before = loadPooled(beforePaths);
  const after = loadPooled(afterPaths);
  for (const config of CONFIGS) {
    const b = before[config]?.rounds;
    const a = after[config]?.rounds;
    if (!b && !a) continue;
    const keys = Object.keys(figuresOf(config, (a ?? b)![0]!));
    process.stdout.write(
      `\n**${config}** (ms; median (min–max) of ${b?.length ?? 0} before, ${a?.length ?? 0} after)\n\n| step | before | after |\n|---|---|---|\n`,
    );
    for (const key of keys) process.stdout.write(`| ${key} | ${cell(config, b, key)} | ${cell(config, a, key)} |\n`);
  }
}

async function main(): Promise<void> {
  if (args.render) return printResults(load(args.render));
  if (args.compare) {
    const [beforePath, afterPath] = args.compare.split(',');
    return compare(beforePath!, afterPath!);
  }
  const info = runInfo();
  process.stdout.write(`time-to-ready: ${ROUNDS} rounds of ${SELECTED.join(', ')}\n${JSON.stringify(info)}\n`);
  const servers: Servers = {};
  try {
    if (SELECTED.some((c) => c.endsWith('-local'))) servers.local = await startChildRuntime(HOST, { stderrTailChars: 4_000 });
    if (SELECTED.some((c) => c.endsWith('-hosted'))) servers.hosted = await startSoakStack({ runtimes: 1 });
    if (SELECTED.includes('chromium-local')) servers.chromium = await startChromiumRig();
    const results: Results = {};
    for (const config of SELECTED) {
      results[config] = { first: record(await connectOnce(config, servers), loadavg().split(' ')[0]!), rounds: [] };
      await sleep(PAUSE_MS);
    }
    for (let round = 0; round < ROUNDS; round++) {
      for (const config of SELECTED) {
        const load = loadavg().split(' ')[0]!;
        const r = record(await connectOnce(config, servers), load);
        results[config]!.rounds.push(r);
        process.stdout.write(`round ${round + 1} ${config}: ready ${fmt(total(figuresOf(config, r)))} ms (load ${load})\n`);
        await sleep(config.startsWith('floor') ? 100 : PAUSE_MS);
      }
    }
    const loadavgAfter = loadavg();
    printResults(results);
    finishReport(info, loadavgAfter, args.json, { rounds: ROUNDS, results });
  } finally {
    await servers.local?.stop();
    await servers.hosted?.stop();
    await servers.chromium?.close();
  }
}

await runBench('time-to-ready', main);
