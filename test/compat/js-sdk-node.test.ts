/**
 * Compatibility: an UNMODIFIED app on `@reactor-team/js-sdk@2.9.0` (the incumbent's client for
 * the same wire protocol) against the Arclight runtime in local mode, in Node with
 * @roamhq/wrtc standing in for the browser's WebRTC globals.
 *
 * The SDK is used exactly as an app would use it: `new Reactor({ modelName, local: true, apiUrl })`,
 * `connect()`, `on('statusChanged' | 'trackReceived' | 'message')`, `sendCommand()`,
 * `disconnect()`. The only instrumentation is a pass-through wrapper around `fetch` that records
 * what the SDK puts on the wire (methods, paths, headers, bodies, statuses) so the test can pin
 * the facts docs/compat-notes.md relies on.
 */

import wrtc from '@roamhq/wrtc';
import type { Reactor as ReactorType, ReactorStatus } from '@reactor-team/js-sdk';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import { startHostedStack, type HostedStack } from '../support/hosted-stack.ts';
import pattern, { PATCH } from '../../models/examples/pattern/index.ts';
import uploadModel, { uploadedFiles } from '../fixtures/upload-model.ts';
import { createHash } from 'node:crypto';
import { rgbToYuv } from '../../models/examples/shared/i420-canvas.ts';

const LOOPBACK = '127.0.0.1';
const PATCH_CENTRE = { x: PATCH.x + PATCH.size / 2, y: PATCH.y + PATCH.size / 2 };
const RED = rgbToYuv(0xe0, 0x10, 0x10);
const GREEN = rgbToYuv(0x00, 0xff, 0x00);
/** Per-component slack for VP8 at a flat 200x200 patch (measured error is a few units). */
const TOLERANCE = 24;

// ---------------------------------------------------------------------------
// WebRTC globals the SDK expects in a browser, from wrtc
// ---------------------------------------------------------------------------

const g = globalThis as Record<string, unknown>;
g.RTCPeerConnection = wrtc.RTCPeerConnection;
g.RTCSessionDescription = wrtc.RTCSessionDescription;
g.RTCIceCandidate = wrtc.RTCIceCandidate;
g.MediaStream = wrtc.MediaStream;
g.MediaStreamTrack = wrtc.MediaStreamTrack;

// The SDK is chatty on console.debug (every status change, every poll); keep test output readable.
const originalDebug = console.debug;
console.debug = () => {};

// ---------------------------------------------------------------------------
// Wire recorder: a transparent fetch wrapper
// ---------------------------------------------------------------------------

interface WireCall {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: unknown;
  status: number;
  at: number;
}

const wire: WireCall[] = [];
const realFetch = globalThis.fetch;
globalThis.fetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
  const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
  const headers: Record<string, string> = {};
  new Headers(init?.headers).forEach((value, key) => (headers[key] = value));
  let body: unknown;
  if (typeof init?.body === 'string') {
    try {
      body = JSON.parse(init.body);
    } catch {
      body = init.body;
    }
  }
  const response = await realFetch(input, init);
  wire.push({ method: init?.method ?? 'GET', path: url.pathname, headers, body, status: response.status, at: Date.now() });
  return response;
};

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

interface I420 {
  y: number;
  u: number;
  v: number;
}

interface SinkFrame {
  width: number;
  height: number;
  data: Uint8Array;
}

interface VideoSink {
  onframe: ((event: { frame: SinkFrame }) => void) | null;
  stop(): void;
}

/** Counts frames of a received track through wrtc's nonstandard RTCVideoSink and keeps the latest. */
class FrameWatcher {
  frames = 0;
  latest: SinkFrame | undefined;
  readonly #sink: VideoSink;

  constructor(track: unknown) {
    const Sink = (wrtc as unknown as { nonstandard: { RTCVideoSink: new (t: unknown) => VideoSink } }).nonstandard.RTCVideoSink;
    this.#sink = new Sink(track);
    this.#sink.onframe = ({ frame }) => {
      this.frames++;
      this.latest = frame;
    };
  }

  /** Y, U and V of the latest frame at (x, y); the frame is I420. */
  sample(x: number, y: number): I420 {
    const f = this.latest;
    if (!f) throw new Error('no frame yet');
    const cw = Math.ceil(f.width / 2);
    const ch = Math.ceil(f.height / 2);
    const c = Math.floor(y / 2) * cw + Math.floor(x / 2);
    const luma = f.width * f.height;
    return { y: f.data[y * f.width + x]!, u: f.data[luma + c]!, v: f.data[luma + cw * ch + c]! };
  }

  stop(): void {
    this.#sink.stop();
  }
}

function near(a: I420, b: I420, tolerance: number): boolean {
  return Math.abs(a.y - b.y) <= tolerance && Math.abs(a.u - b.u) <= tolerance && Math.abs(a.v - b.v) <= tolerance;
}

async function waitFor(check: () => boolean | Promise<boolean>, timeoutMs: number, what: string, detail?: () => unknown): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) {
      const extra = detail ? `; state: ${JSON.stringify(detail())}` : '';
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${extra}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

interface Message {
  type: string;
  data?: unknown;
}

interface Harness {
  reactor: ReactorType;
  statuses: ReactorStatus[];
  messages: Message[];
  runtimeMessages: Message[];
  errors: unknown[];
  tracks: { name: string; kind: string }[];
  watchers: Map<string, FrameWatcher>;
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

describe('@reactor-team/js-sdk@2.9.0 (Node + wrtc) against the runtime in local mode', () => {
  let runtime: Runtime;
  let Reactor: typeof ReactorType;
  const harnesses: Harness[] = [];

  function newHarness(): Harness {
    const reactor = new Reactor({ modelName: 'pattern', local: true, apiUrl: runtime.url });
    const h: Harness = { reactor, statuses: [], messages: [], runtimeMessages: [], errors: [], tracks: [], watchers: new Map() };
    reactor.on('statusChanged', (s: ReactorStatus) => h.statuses.push(s));
    reactor.on('message', (m: Message) => h.messages.push(m));
    reactor.on('runtimeMessage', (m: Message) => h.runtimeMessages.push(m));
    reactor.on('error', (e: unknown) => h.errors.push(e));
    reactor.on('trackReceived', (name: string, track: { kind: string }) => {
      h.tracks.push({ name, kind: track.kind });
      if (track.kind === 'video') {
        h.watchers.get(name)?.stop();
        h.watchers.set(name, new FrameWatcher(track));
      }
    });
    harnesses.push(h);
    return h;
  }

  async function getSession(): Promise<{ status: number; body: unknown }> {
    const res = await realFetch(`${runtime.url}/session`);
    return { status: res.status, body: await res.json().catch(() => null) };
  }

  beforeAll(async () => {
    runtime = await startRuntime({ model: pattern as never, port: 0, host: LOOPBACK, ice: { hostAddresses: [LOOPBACK] } });
    await runtime.loaded;
    ({ Reactor } = await import('@reactor-team/js-sdk'));
  });

  afterEach(async () => {
    for (const h of harnesses.splice(0)) {
      for (const w of h.watchers.values()) w.stop();
      if (h.reactor.getStatus() !== 'disconnected' || h.reactor.getSessionId()) await h.reactor.disconnect().catch(() => {});
    }
  });

  afterAll(async () => {
    await runtime?.close();
    globalThis.fetch = realFetch;
    console.debug = originalDebug;
  });

  it('connects, streams main_video, delivers messages and commands, and stops the session', { timeout: 90_000 }, async () => {
    wire.length = 0;
    const h = newHarness();
    const { reactor } = h;

    await reactor.connect();
    await waitFor(
      () => reactor.getStatus() === 'ready',
      20_000,
      'status ready',
      () => ({ statuses: h.statuses, errors: h.errors }),
    );
    expect(h.statuses).toEqual(['connecting', 'waiting', 'ready']);
    expect(h.errors).toEqual([]);
    expect(reactor.getSessionId()).toMatch(/\S/);
    expect(reactor.getCapabilities()?.tracks.map((t) => t.name)).toEqual(['main_video', 'tone']);

    // Both output tracks arrive, named by the SDK from its transceiver map.
    await waitFor(
      () => h.tracks.length >= 2,
      10_000,
      'both tracks',
      () => h.tracks,
    );
    expect(h.tracks).toEqual(
      expect.arrayContaining([
        { name: 'main_video', kind: 'video' },
        { name: 'tone', kind: 'audio' },
      ]),
    );

    // Decoded frames of main_video, the patch in its default colour.
    const video = h.watchers.get('main_video')!;
    await waitFor(
      () => video.frames > 10,
      20_000,
      'more than 10 decoded frames',
      () => ({ frames: video.frames }),
    );
    expect(video.latest?.width).toBe(1280);
    expect(video.latest?.height).toBe(720);
    await waitFor(
      () => near(video.sample(PATCH_CENTRE.x, PATCH_CENTRE.y), RED, TOLERANCE),
      10_000,
      'the red patch',
      () => video.sample(PATCH_CENTRE.x, PATCH_CENTRE.y),
    );

    // The model greets each connection; the SDK emits application-scope payloads as {type, data}.
    await waitFor(
      () => h.messages.some((m) => m.type === 'welcome'),
      10_000,
      'the welcome message',
      () => h.messages,
    );
    const welcome = h.messages.find((m) => m.type === 'welcome')!;
    expect(welcome.data).toMatchObject({ model: 'pattern' });
    expect(typeof (welcome.data as { frame: unknown }).frame).toBe('number');

    // A command with a reply: no request_id on the wire from 2.9.0, the reply comes back as an application message.
    await reactor.sendCommand('set_color', { color: '#00ff00' });
    await waitFor(
      () => h.messages.some((m) => m.type === 'color_changed'),
      10_000,
      'color_changed',
      () => h.messages,
    );
    expect(h.messages.find((m) => m.type === 'color_changed')).toEqual({ type: 'color_changed', data: { color: '#00ff00' } });
    await waitFor(
      () => near(video.sample(PATCH_CENTRE.x, PATCH_CENTRE.y), GREEN, TOLERANCE),
      10_000,
      'the green patch',
      () => video.sample(PATCH_CENTRE.x, PATCH_CENTRE.y),
    );
    // Nothing the runtime sent was a failure.
    expect(h.runtimeMessages.filter((m) => m.type === 'command_failed')).toEqual([]);

    // Liveness: 2.9.0 pings on the runtime scope every 5 s; the runtime answers with a pong.
    await waitFor(
      () => h.runtimeMessages.some((m) => m.type === 'pong'),
      15_000,
      'a pong',
      () => h.runtimeMessages,
    );

    const session = await getSession();
    expect(session.status).toBe(200);
    expect(session.body).toMatchObject({ session_id: reactor.getSessionId(), state: 'ACTIVE' });

    video.stop();
    await reactor.disconnect();
    expect(reactor.getStatus()).toBe('disconnected');
    expect(reactor.getSessionId()).toBeUndefined();
    await waitFor(async () => (await getSession()).status === 404, 10_000, 'GET /session to answer 404');
    expect(runtime.sessions.current).toBeUndefined();

    // ---- What went over the wire (see docs/compat-notes.md) ----
    const calls = wire.map((c) => `${c.method} ${c.path.replace(/\/sessions\/[^/]+\//, '/sessions/{sid}/')} ${c.status}`);
    expect(calls[0]).toBe('POST /start_session 200');
    expect(calls[1]).toBe('GET /sessions/{sid}/transport/webrtc/ice_servers 200');
    expect(calls[2]).toBe('POST /sessions/{sid}/transport/webrtc/sdp_params 202');
    // Then GET polls: 202 while pending, one 200 with the answer.
    const polls = calls.slice(3, calls.indexOf('POST /stop_session 200'));
    expect(polls.length).toBeGreaterThanOrEqual(1);
    expect(polls.at(-1)).toBe('GET /sessions/{sid}/transport/webrtc/sdp_params 200');
    expect(polls.slice(0, -1).every((p) => p === 'GET /sessions/{sid}/transport/webrtc/sdp_params 202')).toBe(true);
    expect(calls.at(-1)).toBe('POST /stop_session 200');

    const start = wire[0]!;
    expect(start.headers).toMatchObject({
      'reactor-api-version': '1',
      'reactor-api-accept-version': '1',
      'content-type': 'application/json',
    });
    expect(start.headers.authorization).toBeUndefined();
    expect(start.body).toEqual({});
    const ice = wire[1]!;
    expect(ice.headers).toEqual({ authorization: 'Bearer local', 'reactor-webrtc-version': '1.0' });
    const offer = wire[2]!;
    expect(offer.headers).toMatchObject({
      authorization: 'Bearer local',
      'reactor-webrtc-version': '1.0',
      'content-type': 'application/json',
    });
    expect(offer.body).toMatchObject({
      sdp_offer: expect.stringContaining('v=0'),
      client_info: { sdk_version: '2.9.0', sdk_type: 'js' },
      track_mapping: [
        { mid: expect.any(String), name: 'main_video', kind: 'video', direction: 'recvonly' },
        { mid: expect.any(String), name: 'tone', kind: 'audio', direction: 'recvonly' },
      ],
    });
    const stop = wire.at(-1)!;
    expect(stop.body).toBeUndefined();
    expect(stop.headers).toEqual({ 'reactor-api-version': '1', 'reactor-api-accept-version': '1' });
  });

  it(
    'reconnect() after a recoverable transport drop renegotiates with PUT sdp_params on the same session',
    { timeout: 90_000 },
    async () => {
      wire.length = 0;
      const h = newHarness();
      const { reactor } = h;
      await reactor.connect();
      await waitFor(
        () => reactor.getStatus() === 'ready',
        20_000,
        'status ready',
        () => ({ statuses: h.statuses, errors: h.errors }),
      );
      const sessionId = reactor.getSessionId();
      const session = runtime.sessions.current!;
      expect(session.id).toBe(sessionId);
      const firstConnection = session.legacyConnectionId!;
      expect(firstConnection).toBeDefined();
      await waitFor(() => (h.watchers.get('main_video')?.frames ?? 0) > 3, 20_000, 'first frames');

      // Break the network between runtime and client: the runtime's peer goes silent. 2.9.0 treats
      // a peer that goes 'disconnected'/'closed' as recoverable: status goes to 'disconnected' but
      // the session id is kept for reconnect(). (Closing the runtime's peer instead was flaky: the
      // client's packets to the closed port draw ICMP errors and libwebrtc sometimes reports
      // 'failed', which 2.9.0 treats as fatal.)
      session.connection(firstConnection)!.simulateNetworkLoss();
      await waitFor(
        () => reactor.getStatus() === 'disconnected',
        30_000,
        'the SDK to notice the drop',
        () => ({
          statuses: h.statuses,
          errors: h.errors,
        }),
      );
      expect(reactor.getSessionId()).toBe(sessionId);
      expect(runtime.sessions.current?.id).toBe(sessionId);

      const before = wire.length;
      h.messages.length = 0;
      await reactor.reconnect();
      await waitFor(
        () => reactor.getStatus() === 'ready',
        20_000,
        'ready again',
        () => ({ statuses: h.statuses, errors: h.errors }),
      );
      const reconnectCalls = wire.slice(before).map((c) => `${c.method} ${c.path.split('/').at(-1)} ${c.status}`);
      expect(reconnectCalls.slice(0, 2)).toEqual(['GET ice_servers 200', 'PUT sdp_params 202']);
      expect(reconnectCalls.at(-1)).toBe('GET sdp_params 200');
      expect(runtime.sessions.current?.id).toBe(sessionId);

      // Media and commands flow on the new transport.
      await waitFor(() => (h.watchers.get('main_video')?.frames ?? 0) > 5, 20_000, 'frames after reconnect');
      await reactor.sendCommand('set_color', { color: '#00ff00' });
      await waitFor(
        () => h.messages.some((m) => m.type === 'color_changed'),
        10_000,
        'color_changed after reconnect',
        () => h.messages,
      );
      const video = h.watchers.get('main_video')!;
      await waitFor(
        () => near(video.sample(PATCH_CENTRE.x, PATCH_CENTRE.y), GREEN, TOLERANCE),
        10_000,
        'the green patch after reconnect',
        () => video.sample(PATCH_CENTRE.x, PATCH_CENTRE.y),
      );

      await reactor.disconnect();
      await waitFor(async () => (await getSession()).status === 404, 10_000, 'GET /session to answer 404');
    },
  );
});

describe('@reactor-team/js-sdk@2.9.0 (Node + wrtc) uploads in local mode', () => {
  let runtime: Runtime;
  let Reactor: typeof ReactorType;

  beforeAll(async () => {
    runtime = await startRuntime({
      model: uploadModel as never,
      port: 0,
      host: LOOPBACK,
      ice: { hostAddresses: [LOOPBACK] },
      playground: false,
    });
    await runtime.loaded;
    ({ Reactor } = await import('@reactor-team/js-sdk'));
  });
  afterAll(async () => runtime?.close());

  it('uploadFile → FileRef → sendCommand with it: the hook fires and the handler reads the bytes', { timeout: 60_000 }, async () => {
    const reactor = new Reactor({ modelName: 'upload-model', local: true, apiUrl: runtime.url });
    const messages: Message[] = [];
    const runtimeMessages: Message[] = [];
    reactor.on('message', (m: Message) => messages.push(m));
    reactor.on('runtimeMessage', (m: Message) => runtimeMessages.push(m));
    try {
      await reactor.connect();
      await waitFor(() => reactor.getStatus() === 'ready', 20_000, 'status ready');
      const bytes = new Uint8Array(50_000).map((_, i) => (i * 7) % 256);
      const ref = await reactor.uploadFile(new Blob([bytes], { type: 'image/png' }), { name: 'sdk.png' });
      expect(ref).toMatchObject({ name: 'sdk.png', mimeType: 'image/png', size: 50_000 });
      await waitFor(() => uploadedFiles.some((f) => f.name === 'sdk.png'), 10_000, 'the file_uploaded hook');
      await reactor.sendCommand('inspect', { file: ref, label: 'sdk' });
      await waitFor(
        () => messages.some((m) => m.type === 'inspect_result'),
        10_000,
        'the reply',
        () => ({ messages, runtimeMessages }),
      );
      const sha = createHash('sha256').update(bytes).digest('hex');
      expect(messages.find((m) => m.type === 'inspect_result')?.data).toEqual({
        label: 'sdk',
        name: 'sdk.png',
        mime_type: 'image/png',
        size: 50_000,
        sha256: sha,
        stream_sha256: sha,
        path_sha256: sha,
      });
      expect(runtimeMessages.filter((m) => m.type === 'command_failed')).toEqual([]);
    } finally {
      await reactor.disconnect().catch(() => {});
    }
  });
});

describe('@reactor-team/js-sdk@2.9.0 (Node + wrtc) through the coordinator (hosted mode)', () => {
  let stack: HostedStack;
  let Reactor: typeof ReactorType;

  beforeAll(async () => {
    stack = await startHostedStack({ runtimeId: 'gpu-sdk' });
    ({ Reactor } = await import('@reactor-team/js-sdk'));
  });
  afterAll(async () => stack?.close());

  it('connects with a server-minted token, streams, runs a command, and its disconnect ends the session', { timeout: 90_000 }, async () => {
    const { coordinator, runtime } = stack;
    const token = await stack.mintToken();
    const reactor = new Reactor({ modelName: 'pattern', apiUrl: coordinator.url });
    const statuses: ReactorStatus[] = [];
    const messages: Message[] = [];
    const errors: unknown[] = [];
    let watcher: FrameWatcher | undefined;
    reactor.on('statusChanged', (s: ReactorStatus) => statuses.push(s));
    reactor.on('message', (m: Message) => messages.push(m));
    reactor.on('error', (e: unknown) => errors.push(e));
    reactor.on('trackReceived', (name: string, track: { kind: string }) => {
      if (name === 'main_video' && track.kind === 'video') watcher = new FrameWatcher(track);
    });
    try {
      await reactor.connect(token);
      await waitFor(
        () => reactor.getStatus() === 'ready',
        30_000,
        'status ready',
        () => ({ statuses, errors }),
      );
      const sessionId = reactor.getSessionId()!;
      expect(runtime.sessions.current?.id).toBe(sessionId);
      await waitFor(() => (watcher?.frames ?? 0) > 5, 20_000, 'frames through the coordinator');
      await waitFor(async () => (await coordinator.sessions.get(sessionId))?.status === 'ready', 10_000, 'the coordinator to see ready');
      await reactor.sendCommand('set_color', { color: '#00ff00' });
      await waitFor(() => messages.some((m) => m.type === 'color_changed'), 10_000, 'color_changed');
      await reactor.disconnect();
      await waitFor(
        async () => (await coordinator.sessions.get(sessionId))?.status === 'ended',
        10_000,
        'the coordinator to end the session',
      );
      await waitFor(() => runtime.sessions.current === undefined, 10_000, 'the runtime to end the session');
      expect(errors).toEqual([]);
    } finally {
      watcher?.stop();
      if (reactor.getStatus() !== 'disconnected') await reactor.disconnect().catch(() => {});
    }
  });
});
