/**
 * SDP renegotiation in place (issue 10, part 3): a client peer (wrtc) that renegotiates on the
 * peer it already has — here adding an input video transceiver mid-session — gets an answer from
 * the runtime peer it is connected to (same ICE credentials, same DTLS certificate), so it can
 * apply it. The runtime attaches the new input; the output video and the data channel go on
 * without a break. A bad offer from that peer → 400 `invalid_sdp`, and the connection streams on.
 * (A renegotiation from a fresh client peer replaces the runtime peer: ice-restart.test.ts.)
 */

import wrtc from '@roamhq/wrtc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import echo from '../../models/examples/echo/index.ts';
import type { Envelope } from '../../protocol/messages.ts';
import { WEBRTC_VERSION, WEBRTC_VERSION_HEADER } from '../../protocol/versions.ts';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import { createLogger } from '../../server-kit/log.ts';
import { peerIdentity } from '../../runtime/transport/signalling/offer-origin.ts';
import { FrameArrivals } from '../support/media-fault-probe.ts';
import { keepLoopbackCandidates, openRawPeer, type RawPeer } from '../support/raw-peer.ts';
import { waitUntil, waitUntilStill } from '../support/video-probe.ts';

const LOOPBACK = '127.0.0.1';
const WIDTH = 320;
const HEIGHT = 240;

type Nonstandard = {
  RTCVideoSink: new (track: MediaStreamTrack) => { stop(): void; onframe: (() => void) | null };
  RTCVideoSource: new () => { createTrack(): MediaStreamTrack; onFrame(frame: { width: number; height: number; data: Uint8Array }): void };
};
const { RTCVideoSink, RTCVideoSource } = (wrtc as unknown as { nonstandard: Nonstandard }).nonstandard;

describe('SDP renegotiation on the same client peer', () => {
  let runtime: Runtime;
  let peer: RawPeer;
  const frames = new FrameArrivals();
  /**
   * When the runtime let each output frame go (its frame tap). The client's frames are judged
   * against these rather than against 30 fps: a loaded 2-core machine sends fewer, and a stall of
   * the sender is no break the renegotiation caused.
   */
  const sends = new FrameArrivals();
  const stops: Array<() => void> = [];
  let rid = 0;
  /** The input transceiver the first test adds. */
  let input: RTCRtpTransceiver | undefined;

  const sdpParams = () => `${runtime.url}/sessions/${peer.sessionId}/transport/webrtc/connections/${peer.connectionId}/sdp_params`;
  const headers = { 'content-type': 'application/json', [WEBRTC_VERSION_HEADER]: WEBRTC_VERSION };

  /** PUTs an offer; on 202 polls the answer. Resolves the status and the answer or error body. */
  async function renegotiate(sdp: string, body: Record<string, unknown> = {}): Promise<{ status: number; answer?: string; code?: string }> {
    const put = await fetch(sdpParams(), { method: 'PUT', headers, body: JSON.stringify({ sdp_offer: sdp, ...body }) });
    if (put.status !== 202) return { status: put.status, code: ((await put.json()) as { code: string }).code };
    await put.arrayBuffer();
    for (let polls = 0; polls < 50; polls++) {
      const got = await fetch(sdpParams(), { headers });
      if (got.status === 200) return { status: 200, answer: ((await got.json()) as { sdp_answer: string }).sdp_answer };
      if (got.status !== 202) return { status: got.status, code: ((await got.json()) as { code: string }).code };
      await got.arrayBuffer();
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error('no answer to the renegotiation');
  }

  /** A command round trip on the data channel. */
  async function setBrightness(value: number): Promise<Envelope> {
    const requestId = `b${++rid}`;
    const from = peer.messages.length;
    peer.sendRaw(JSON.stringify({ scope: 'application', data: { type: 'set_brightness', data: { value }, request_id: requestId } }));
    return peer.waitFor((m) => m.data.request_id === requestId, 5_000, from);
  }

  async function inputFramesCounted(): Promise<number> {
    const text = await (await fetch(`${runtime.url}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith('arclight_input_frames_total{track="webcam"}'));
    return line ? Number(line.split(' ').pop()) : 0;
  }

  beforeAll(async () => {
    runtime = await startRuntime({
      model: echo as never,
      port: 0,
      host: LOOPBACK,
      ice: { hostAddresses: [LOOPBACK] },
      playground: false,
      logger: createLogger({ test: 'renegotiation' }, 'error'),
    });
    await runtime.loaded;
    const started = (await (await fetch(`${runtime.url}/start_session`, { method: 'POST', body: '{}' })).json()) as { session_id: string };
    // Only the output video (and the data channel): the input comes later, by renegotiation.
    runtime.sessions.current!.outputVideoTrack('main_video')!.setFrameTap(() => sends.note(performance.now()));
    peer = await openRawPeer(runtime.url, started.session_id, { tracks: ['main_video'] });
    const sink = new RTCVideoSink(peer.pc.getTransceivers()[0]!.receiver.track);
    sink.onframe = () => frames.note(performance.now());
    stops.push(() => sink.stop());
    await waitUntil(() => frames.count > 5, 10_000, 'output video before the renegotiation');
  }, 30_000);

  afterAll(async () => {
    for (const stop of stops.splice(0)) stop();
    peer?.close();
    await runtime?.close();
  });

  it('adds an input track in place: the model gets it, output video and the data channel go on', async () => {
    const source = new RTCVideoSource();
    const data = new Uint8Array(WIDTH * HEIGHT * 1.5).fill(128);
    const feeder = setInterval(() => source.onFrame({ width: WIDTH, height: HEIGHT, data }), 33);
    const camera = source.createTrack();
    stops.push(() => {
      clearInterval(feeder);
      camera.stop();
    });
    const from = performance.now();
    const messagesBefore = peer.messages.length;
    const firstAnswer = peerIdentity(peer.pc.remoteDescription!.sdp);
    input = peer.pc.addTransceiver(camera, { direction: 'sendonly' });
    await peer.pc.setLocalDescription(await peer.pc.createOffer());
    await waitUntil(() => peer.pc.iceGatheringState === 'complete', 5_000, 'ICE gathering of the new offer');
    const offer = keepLoopbackCandidates(peer.pc.localDescription!.sdp);
    const outcome = await renegotiate(offer, {
      track_mapping: [
        { mid: peer.pc.getTransceivers()[0]!.mid, name: 'main_video', kind: 'video', direction: 'recvonly' },
        { mid: input.mid, name: 'webcam', kind: 'video', direction: 'sendonly' },
      ],
    });
    expect(outcome.status, JSON.stringify(outcome)).toBe(200);
    // The same runtime peer answers (same certificate, same ICE credentials): the client applies it to the peer it has.
    expect(peerIdentity(outcome.answer!)).toEqual(firstAnswer);
    await peer.pc.setRemoteDescription({ type: 'answer', sdp: outcome.answer! });
    expect(peer.pc.signalingState).toBe('stable');

    // The model sees the input (it announces the input size), and the runtime counts its frames.
    const started = await peer.waitFor((m) => m.data.type === 'input_started', 10_000, messagesBefore);
    expect(started.data.data).toEqual({ width: WIDTH, height: HEIGHT });
    await waitUntil(async () => (await inputFramesCounted()) > 10, 5_000, 'input frames counted');

    // Output video went on throughout, the peer and the channel too (no reconnect: no new connection_info).
    const until = performance.now();
    const flow = JSON.stringify({
      longestGap: frames.longestGap(from, until),
      longestSendGap: sends.longestGap(from, until),
      lastSecond: frames.between(until - 1_000, until),
      sentLastSecond: sends.between(until - 1_000, until),
    });
    expect(frames.longestGap(from, until) - sends.longestGap(from, until), flow).toBeLessThan(1_000);
    // In the last second, a third of what was sent (it was "> 10", a third of 30 fps).
    expect(sends.between(until - 1_000, until), flow).toBeGreaterThan(0);
    expect(frames.between(until - 1_000, until), flow).toBeGreaterThanOrEqual(Math.ceil(sends.between(until - 1_000, until) / 3));
    expect(peer.pc.connectionState).toBe('connected');
    expect(peer.channel.readyState).toBe('open');
    expect(peer.messages.slice(messagesBefore).filter((m) => m.data.type === 'connection_info')).toEqual([]);
    expect((await setBrightness(1.5)).data.type).toBe('brightness_changed');
  }, 25_000);

  it('a bad offer from the same peer → 400 invalid_sdp, and the connection streams on', async () => {
    const current = peer.pc.localDescription!.sdp;
    const [head, ...sections] = current.split(/\r\n(?=m=)/);
    // Drops the first m-line: a renegotiation may disable an m-line, never remove it.
    const dropped = await renegotiate([head, ...sections.slice(1)].join('\r\n'));
    expect(dropped).toEqual({ status: 400, code: 'invalid_sdp' });
    // A new video m-line with no codec the runtime has: werift cannot apply it (tried on a scratch peer first).
    const foreign = `${current.trimEnd()}\r\nm=video 9 UDP/TLS/RTP/SAVPF 127\r\nc=IN IP4 0.0.0.0\r\na=mid:9\r\na=sendonly\r\na=rtpmap:127 FOO/90000\r\n`;
    const noCodec = await renegotiate(foreign);
    expect(noCodec).toEqual({ status: 400, code: 'invalid_sdp' });

    const from = performance.now();
    // Counted, with room for a loaded machine: how fast 15 frames come is not the point.
    await waitUntil(() => frames.between(from, performance.now()) >= 15, 10_000, 'output video after the refused offers');
    const until = performance.now();
    expect(frames.longestGap(from, until) - sends.longestGap(from, until)).toBeLessThan(1_000);
    expect(peer.pc.connectionState).toBe('connected');
    expect((await setBrightness(1)).data.type).toBe('brightness_changed');
    // Input still reaches the model. Room for a loaded machine: the wrtc sender's own encoder
    // (libwebrtc, CPU-adapted) sent under 6 frames in 10 s once while benchmarks ran beside it.
    const counted = await inputFramesCounted();
    await waitUntil(async () => (await inputFramesCounted()) > counted + 5, 25_000, 'input frames after the refused offers');
  }, 45_000);

  it('an m-line turned inactive in place is detached: its input stops reaching the model, the rest goes on', async () => {
    expect(input).toBeDefined();
    input!.direction = 'inactive';
    await peer.pc.setLocalDescription(await peer.pc.createOffer());
    const outcome = await renegotiate(keepLoopbackCandidates(peer.pc.localDescription!.sdp));
    expect(outcome.status, JSON.stringify(outcome)).toBe(200);
    const section = outcome.answer!.split(/\r\n(?=m=)/).find((lines) => lines.includes(`\r\na=mid:${input!.mid}\r\n`));
    expect(section).toMatch(/\r\na=inactive\r\n/);
    await peer.pc.setRemoteDescription({ type: 'answer', sdp: outcome.answer! });
    // Input frames already on their way land first (however long a loaded machine takes, not a
    // fixed 500 ms); then none for a second, while output frames go on: half of what was sent
    // (it was "> 15", half of 30 fps).
    await waitUntilStill(inputFramesCounted, 500, 10_000, 'the input frame count');
    const settled = await inputFramesCounted();
    const from = performance.now();
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const until = performance.now();
    expect(await inputFramesCounted()).toBe(settled);
    expect(sends.between(from, until)).toBeGreaterThan(0);
    expect(frames.between(from, until)).toBeGreaterThanOrEqual(Math.ceil(sends.between(from, until) / 2));
    expect(peer.pc.connectionState).toBe('connected');
    expect((await setBrightness(1)).data.type).toBe('brightness_changed');
  }, 15_000);
});
