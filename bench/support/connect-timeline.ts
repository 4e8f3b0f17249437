/**
 * Timestamps for one client connect, from outside the client: a pass-through `fetch` (every HTTP
 * call's start and end) and an RTCPeerConnection wrapper (offer, gathering, answer applied, ICE,
 * DTLS, data channel open, first decoded video frame) — the same for our client and for
 * @reactor-team/js-sdk, which sees only the globals. The runtime's own steps come from its session
 * log's `connection ready` line (runtime/session/connect-timings.ts); all times are wall-clock
 * milliseconds (`performance.timeOrigin + performance.now()`), so both sides share one axis on one
 * machine.
 *
 * One connect is measured at a time: `beginConnect()` opens the timeline the wrappers write to.
 */

export function wallClockMs(): number {
  return performance.timeOrigin + performance.now();
}

export interface HttpCall {
  readonly label: string;
  readonly start: number;
  end: number;
  status: number;
}

export class ConnectTimeline {
  readonly t0: number;
  readonly marks = new Map<string, number>();
  readonly http: HttpCall[] = [];

  /** `t0`: the wall-clock ms of the `connect()` call (now, unless the connect was stamped elsewhere: a page). */
  constructor(t0: number = wallClockMs()) {
    this.t0 = t0;
  }

  /** Records `name` now (or at `at`), unless it was recorded already. */
  mark(name: string, at: number = wallClockMs()): void {
    if (!this.marks.has(name)) this.marks.set(name, at);
  }

  /** Milliseconds from `t0` to the mark, or NaN without it. */
  at(name: string): number {
    const value = this.marks.get(name);
    return value === undefined ? NaN : value - this.t0;
  }

  /** The first / last call with this label, milliseconds from `t0`. */
  call(label: string, which: 'first' | 'last' = 'first'): { start: number; end: number } | undefined {
    const calls = this.http.filter((c) => c.label === label);
    const call = which === 'first' ? calls[0] : calls[calls.length - 1];
    return call ? { start: call.start - this.t0, end: call.end - this.t0 } : undefined;
  }

  count(label: string): number {
    return this.http.filter((c) => c.label === label).length;
  }
}

let current: ConnectTimeline | undefined;

/** Opens the timeline the wrappers write to from now on. */
export function beginConnect(): ConnectTimeline {
  current = new ConnectTimeline();
  return current;
}

/** Stops recording (later events, e.g. of a closing peer, go nowhere). */
export function endConnect(): void {
  current = undefined;
}

/** What an HTTP call of the connect flow is, from its method and path. */
export function httpLabel(method: string, path: string): string {
  if (path.endsWith('/start_session')) return 'start_session';
  if (path.endsWith('/stop_session')) return 'stop_session';
  if (/\/ice_servers$/.test(path)) return 'ice_servers';
  if (/\/sdp_params$/.test(path)) return method === 'GET' ? 'get_answer' : 'send_offer';
  if (/\/ice_candidates$/.test(path)) return 'ice_candidates';
  if (/\/connections$/.test(path)) return 'register_connection';
  if (/\/logs$/.test(path)) return 'logs';
  if (path === '/sessions') return 'create_session';
  if (/^\/sessions\/[^/]+$/.test(path)) return method === 'GET' ? 'get_session' : method === 'DELETE' ? 'end_session' : 'session';
  return `${method} ${path}`;
}

/** Wraps `globalThis.fetch` once: every call while a timeline is open is recorded in it. */
export function instrumentFetch(): void {
  const marker = Symbol.for('arclight.bench.fetch');
  const holder = globalThis as unknown as Record<symbol, boolean>;
  if (holder[marker]) return;
  holder[marker] = true;
  const realFetch = globalThis.fetch;
  globalThis.fetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const timeline = current;
    const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
    const call: HttpCall = {
      label: httpLabel(init?.method ?? (input instanceof Request ? input.method : 'GET'), url.pathname),
      start: wallClockMs(),
      end: NaN,
      status: 0,
    };
    const response = await realFetch(input, init);
    call.end = wallClockMs();
    call.status = response.status;
    timeline?.http.push(call);
    return response;
  };
}

interface VideoSinkLike {
  onframe: ((event: { frame: { width: number; height: number; data: Uint8Array } }) => void) | null;
  stop(): void;
}

/** Whether an I420 frame is the runtime's black opening frame (luma 16 everywhere), from a sparse sample of its luma. */
function isBlack(frame: { width: number; height: number; data: Uint8Array }): boolean {
  const pixels = frame.width * frame.height;
  let sum = 0;
  let n = 0;
  for (let i = 0; i < pixels; i += 997) {
    sum += frame.data[i]!;
    n++;
  }
  return n === 0 || sum / n < 20;
}
export type VideoSinkConstructor = new (track: MediaStreamTrack) => VideoSinkLike;

/**
 * An RTCPeerConnection constructor that builds the real one (`Real`) and stamps its connect
 * steps into the open timeline. `VideoSink` (wrtc's nonstandard RTCVideoSink) stamps the first
 * decoded frame of the first video track received (`first_frame`: the runtime opens every picture
 * with one black keyframe) and the first one with the model's picture (`first_model_frame`).
 */
export function instrumentedPeerConnection(Real: typeof RTCPeerConnection, VideoSink: VideoSinkConstructor): typeof RTCPeerConnection {
  function Instrumented(this: unknown, config?: RTCConfiguration): RTCPeerConnection {
    const timeline = current;
    const pc = new Real(config);
    if (!timeline) return pc;
    timeline.mark('pc_created');
    const createOffer = pc.createOffer.bind(pc) as () => Promise<RTCSessionDescriptionInit>;
    (pc as { createOffer: unknown }).createOffer = async () => {
      const offer = await createOffer();
      timeline.mark('offer_created');
      return offer;
    };
    const setRemote = pc.setRemoteDescription.bind(pc);
    pc.setRemoteDescription = async (description: RTCSessionDescriptionInit) => {
      timeline.mark('answer_apply_start');
      await setRemote(description);
      timeline.mark('answer_applied');
    };
    const createDataChannel = pc.createDataChannel.bind(pc);
    pc.createDataChannel = (label: string, init?: RTCDataChannelInit) => {
      const channel = createDataChannel(label, init);
      channel.addEventListener('open', () => timeline.mark('channel_open'));
      return channel;
    };
    pc.addEventListener('icegatheringstatechange', () => {
      if (pc.iceGatheringState === 'complete') timeline.mark('gathered');
    });
    pc.addEventListener('iceconnectionstatechange', () => {
      if (pc.iceConnectionState === 'checking') timeline.mark('ice_checking');
      if (pc.iceConnectionState === 'connected' || pc.iceConnectionState === 'completed') timeline.mark('ice_connected');
    });
    pc.addEventListener('connectionstatechange', () => {
      if (pc.connectionState === 'connected') timeline.mark('dtls_connected');
    });
    pc.addEventListener('track', (event: RTCTrackEvent) => {
      if (event.track.kind !== 'video' || timeline.marks.has('video_track')) return;
      timeline.mark('video_track');
      const sink = new VideoSink(event.track);
      sink.onframe = ({ frame }) => {
        timeline.mark('first_frame');
        if (isBlack(frame)) return;
        timeline.mark('first_model_frame');
        sink.onframe = null;
        setTimeout(() => sink.stop(), 0);
      };
    });
    return pc;
  }
  Object.setPrototypeOf(Instrumented, Real);
  Instrumented.prototype = Real.prototype;
  return Instrumented as unknown as typeof RTCPeerConnection;
}

/** The runtime's connect steps for a connection, from its session log (`connection ready`), as wall-clock marks. */
export interface RuntimeSteps {
  readonly connectMs: number;
  readonly marks: ReadonlyMap<string, number>;
}

interface LogLine {
  message: string;
  fields?: { connection?: number; connect_ms?: number; steps?: Record<string, number> & { offer_at?: number } };
}

/**
 * Reads the session log (`GET {base}/sessions/{sid}/logs`, with `authorization` in hosted mode)
 * for the last `connection ready` line (of `connectionId` when given); undefined when there is
 * none or it has no steps (a runtime from before connect-timings.ts).
 */
export async function runtimeSteps(
  base: string,
  sessionId: string,
  authorization: string | undefined,
  connectionId?: number,
): Promise<RuntimeSteps | undefined> {
  const response = await fetch(`${base}/sessions/${encodeURIComponent(sessionId)}/logs?limit=1000`, {
    headers: { ...(authorization ? { authorization } : {}), 'reactor-api-version': '1' },
  });
  if (!response.ok) return undefined;
  const page = (await response.json()) as { lines: LogLine[] };
  const ready = page.lines
    .filter((l) => l.message === 'connection ready' && (connectionId === undefined || l.fields?.connection === connectionId))
    .pop();
  const steps = ready?.fields?.steps;
  if (!steps || typeof steps.offer_at !== 'number') return undefined;
  const marks = new Map<string, number>([['rt_offer', steps.offer_at]]);
  for (const [name, value] of Object.entries(steps)) {
    if (name !== 'offer_at' && typeof value === 'number') marks.set(`rt_${name}`, steps.offer_at + value);
  }
  return { connectMs: ready?.fields?.connect_ms ?? NaN, marks };
}
