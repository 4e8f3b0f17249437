/**
 * The recording shares the live encoder when it can (issue 26 part 2), end to end: a runtime
 * records `pattern` while a werift client watches it. With an H.264 viewer the recording is the
 * live stream's own frames (segments marked `live`, Constrained Baseline in band, no second
 * encode); with only a VP8 viewer nothing live fits, and the recorder encodes (`own`, High); with
 * `recording.encoder: 'own'` it encodes even beside an H.264 viewer. Each recording, its init
 * and segments joined as a clip download joins them, decodes with FFmpeg to about as many frames
 * as its segments say, over the duration they say.
 */
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Decoder, Demuxer } from 'node-av/api';
import { afterEach, describe, expect, it } from 'vitest';
import pattern from '../../models/examples/pattern/index.ts';
import type { RuntimeEvent } from '../../protocol/session-logs.ts';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import { createLogger } from '../../server-kit/log.ts';
import { readRuntimeEvents } from '../support/event-stream-reader.ts';
import { waitUntil } from '../support/video-probe.ts';
import { openWeriftPeer, type WeriftPeer } from '../support/werift-peer.ts';

const LOOPBACK = '127.0.0.1';
const FPS = 30;
const H264_CB = 'level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f';

type SegmentEvent = Extract<RuntimeEvent, { type: 'recording_segment' }>;

interface Decoded {
  readonly frames: number;
  readonly seconds: number;
  readonly profiles: ReadonlySet<number>;
}

/** init + every segment of the session's recording, joined, decoded with FFmpeg. */
async function decodeRecording(folder: string, sessionId: string): Promise<Decoded> {
  const dir = join(folder, sessionId, 'main_video');
  const segments = readdirSync(dir)
    .filter((f) => f.startsWith('seg-'))
    .sort();
  const path = join(mkdtempSync(join(tmpdir(), 'shared-recording-')), 'all.mp4');
  writeFileSync(path, Buffer.concat([readFileSync(join(dir, 'init.mp4')), ...segments.map((f) => readFileSync(join(dir, f)))]));
  const demuxer = await Demuxer.open(path);
  const stream = demuxer.video()!;
  const decoder = await Decoder.create(stream);
  let frames = 0;
  let seconds = 0;
  const profiles = new Set<number>();
  for (const packet of demuxer.packetsSync()) {
    if (!packet) continue;
    if (packet.streamIndex === stream.index) {
      seconds = Math.max(seconds, (Number(packet.pts + packet.duration) * stream.timeBase.num) / stream.timeBase.den);
      const data = packet.data!;
      for (let at = 0; at + 4 < data.length; at += 4 + data.readUInt32BE(at)) {
        if ((data[at + 4]! & 0x1f) === 7) profiles.add(data[at + 5]!);
      }
      for (const frame of await decoder.decodeAll(packet)) {
        frames++;
        frame.free();
      }
    }
    packet.free();
  }
  for (const frame of await decoder.decodeAll(null)) {
    frames++;
    frame.free();
  }
  await demuxer.close();
  return { frames, seconds, profiles };
}

describe('the recording and the live encoder', () => {
  let runtime: Runtime | undefined;
  let peer: WeriftPeer | undefined;
  afterEach(async () => {
    await peer?.close();
    peer = undefined;
    await runtime?.close();
    runtime = undefined;
  });

  async function record(
    video: { mime: string; parameters?: string },
    encoder?: 'shared' | 'own',
  ): Promise<{ segments: SegmentEvent[]; decoded: Decoded; h264Encodes: number }> {
    const folder = mkdtempSync(join(tmpdir(), 'recordings-'));
    runtime = await startRuntime({
      model: pattern as never,
      port: 0,
      host: LOOPBACK,
      ice: { hostAddresses: [LOOPBACK] },
      playground: false,
      recording: { directory: folder, segmentSeconds: 1, ...(encoder ? { encoder } : {}) },
      logger: createLogger({ test: 'recording-shares-encoder' }, 'error'),
    });
    const events = await readRuntimeEvents(runtime.url);
    try {
      peer = await openWeriftPeer(runtime.url, {
        videoMime: video.mime,
        ...(video.parameters ? { videoParameters: video.parameters } : {}),
      });
      const sessionId = peer.session.session_id;
      const segmentsOf = () => events.ofSession(sessionId).filter((e): e is SegmentEvent => e.type === 'recording_segment');
      // Three whole segments: the recording runs while the client watches.
      await waitUntil(() => segmentsOf().length >= 3, 30_000, 'three recording segments');
      await peer.close();
      peer = undefined;
      await fetch(`${runtime.url}/stop_session`, { method: 'POST', body: '{}' });
      const metrics = await (await fetch(`${runtime.url}/metrics`)).text();
      // The runtime's live encodes by stream; the recorder's own encoder is not among them.
      const h264Encodes = Number(/arclight_encode_duration_seconds_count\{codec="h264"\} (\d+)/.exec(metrics)?.[1] ?? 0);
      await waitUntil(
        () => readdirSync(join(folder, sessionId, 'main_video')).length >= segmentsOf().length + 1,
        10_000,
        'the last segment',
      );
      await new Promise((resolve) => setTimeout(resolve, 300)); // the session's close writes the open segment
      return { segments: segmentsOf(), decoded: await decodeRecording(folder, sessionId), h264Encodes };
    } finally {
      events.stop();
    }
  }

  function expectWhole(segments: readonly SegmentEvent[], decoded: Decoded): void {
    const recordedMs = segments.reduce((sum, s) => sum + s.duration_ms, 0);
    // The events name every segment written while the session ran; the last, written at its end, may follow.
    expect(decoded.seconds * 1000).toBeGreaterThanOrEqual(recordedMs - 1);
    // Frames as sent on this machine (a loaded one sends fewer than 30 a second), and no more than
    // the track's rate over the recording's wall-clock span allows (with a few frames' jitter).
    expect(decoded.frames).toBeGreaterThan(decoded.seconds * FPS * 0.5);
    expect(decoded.frames).toBeLessThanOrEqual(Math.ceil(decoded.seconds * FPS * 1.05) + 2);
  }

  it('with an H.264 viewer, records the live stream: no second encode', async () => {
    const { segments, decoded } = await record({ mime: 'video/H264', parameters: H264_CB });
    expect(segments.map((s) => s.encoder)).toEqual(segments.map(() => 'live'));
    expect(decoded.profiles).toEqual(new Set([66])); // the live stream's Constrained Baseline, not the recorder's High
    expectWhole(segments, decoded);
    // Segments of ~1 s, cut at keyframes asked of the live encoder (the viewer's own keyframes at
    // its start stay inside the first); the one the session's end closes is shorter.
    for (const s of segments.slice(0, 3)) expect(s.duration_ms).toBeGreaterThan(900);
  }, 60_000);

  it('with only a VP8 viewer, encodes the recording itself', async () => {
    const { segments, decoded } = await record({ mime: 'video/VP8' });
    expect(segments.map((s) => s.encoder)).toEqual(segments.map(() => 'own'));
    expect(decoded.profiles).toEqual(new Set([100]));
    expectWhole(segments, decoded);
  }, 60_000);

  it("with recording.encoder 'own', encodes itself beside an H.264 viewer", async () => {
    const { segments, decoded, h264Encodes } = await record({ mime: 'video/H264', parameters: H264_CB }, 'own');
    expect(segments.map((s) => s.encoder)).toEqual(segments.map(() => 'own'));
    expect(decoded.profiles).toEqual(new Set([100]));
    expect(h264Encodes).toBeGreaterThan(0); // the live stream ran beside it
    expectWhole(segments, decoded);
  }, 60_000);
});
