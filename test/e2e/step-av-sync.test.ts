/**
 * A/V sync on an adaptive track (issue 24): a step model returns each step's frames with its
 * audio, and its step time changes (as long as its audio, much longer, shorter, longer again; see
 * test/fixtures/step-av-model.ts). Adaptive playout does not play the frames at their declared
 * rate, so the sound beside them must be timed with them: a werift peer receives both tracks,
 * decodes them (H.264 with node-av, Opus with libopus), maps each flash and each click to the
 * sender's wall clock through the streams' RTCP sender reports — what a browser does to lip-sync —
 * and finds them together in every phase.
 *
 * The bound comes from the step, not from timings: a flash is one video frame (FRAME_CONTENT_MS of
 * content), a click is found to the Opus frame (20 ms) — so |flash − click| < FRAME_CONTENT_MS / 2
 * + 20 ms. Stretched to the step time instead (frames spread evenly over a step 1.8× its audio,
 * the audio played at its sample rate), the marked frame would drift (1.8 − 1) × FLASH_INDEX ×
 * FRAME_CONTENT_MS = 128 ms from its click.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RtcpSrPacket, type RtpPacket } from 'werift';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import { createLogger } from '../../server-kit/log.ts';
import { AUDIO_FRAME_MS } from '../../runtime/media/output-audio-track.ts';
import { OpusDecoder } from '../../runtime/media/opus.ts';
import model, { FRAME_CONTENT_MS, HEIGHT, PHASES, WIDTH, flashLuma } from '../fixtures/step-av-model.ts';
import { waitUntil } from '../support/video-probe.ts';
import { decodeTrack, openWeriftPeer, type WeriftPeer } from '../support/werift-peer.ts';
import { senderClockOf, wallTime, type SenderClock } from '../support/sender-clock.ts';

const LOOPBACK = '127.0.0.1';
const BOUND_MS = FRAME_CONTENT_MS / 2 + AUDIO_FRAME_MS;

describe('A/V sync on an adaptive track, across step-time changes', () => {
  let runtime: Runtime;
  let peer: WeriftPeer | undefined;
  beforeAll(async () => {
    runtime = await startRuntime({
      model: model as never,
      port: 0,
      host: LOOPBACK,
      ice: { hostAddresses: [LOOPBACK] },
      playground: false,
      logger: createLogger({ test: 'step-av-sync' }, 'error'),
    });
  });
  afterAll(async () => {
    await peer?.close();
    await runtime?.close();
  });

  it(`keeps each flash within ${BOUND_MS} ms of its click in every phase (step time 0.6–1.8× its audio)`, async () => {
    peer = await openWeriftPeer(runtime.url, { videoMime: 'video/H264' });
    const clocks = new Map<number, SenderClock>();
    for (const transceiver of [peer.transceiver('main_video'), peer.transceiver('main_audio')]) {
      transceiver.receiver.onRtcp.subscribe((packet) => {
        if (packet instanceof RtcpSrPacket) clocks.set(packet.ssrc, senderClockOf(packet));
      });
    }
    const flashes: Array<{ at: number; phase: number }> = [];
    const clicks: number[] = [];

    let videoSsrc = 0;
    peer.onTrackRtp('main_video', (rtp) => (videoSsrc = rtp.header.ssrc));
    let lastFlash = false;
    const decoding = await decodeTrack(peer, 'main_video', 'h264', (frame, unit) => {
      const luma = frame.data[(HEIGHT / 2) * WIDTH + WIDTH / 2]!;
      const flash = luma > 128;
      const clock = clocks.get(videoSsrc);
      if (flash && !lastFlash && clock) {
        const phase = Math.round((luma - flashLuma(0)) / (flashLuma(1) - flashLuma(0)));
        flashes.push({ at: wallTime(clock, unit.timestamp, 90_000), phase });
      }
      lastFlash = flash;
    });

    const audioDecoder = await OpusDecoder.create({ sampleRate: 48_000, channels: 1 });
    let audioChain = Promise.resolve();
    let lastLoud = false;
    peer.onTrackRtp('main_audio', (rtp: RtpPacket) => {
      const { timestamp, ssrc } = rtp.header;
      const payload = rtp.payload;
      audioChain = audioChain
        .then(async () => {
          const frame = await audioDecoder.decode(payload);
          let peak = 0;
          for (const sample of frame.samples) peak = Math.max(peak, Math.abs(sample));
          const loud = peak > 8_000;
          const clock = clocks.get(ssrc);
          if (loud && !lastLoud && clock) clicks.push(wallTime(clock, timestamp, 48_000));
          lastLoud = loud;
        })
        .catch(() => {});
    });

    // Every phase seen, with at least two flashes after the first (a phase's first flash may come
    // while the rate is still changing over): one pass through the phases is ~15 s.
    const perPhase = (): number[] => PHASES.map((_, p) => flashes.filter((f) => f.phase === p).length);
    try {
      await waitUntil(() => perPhase().every((n) => n >= 3), 45_000, 'three flashes in every phase');
    } finally {
      decoding.close();
      audioDecoder.close();
    }
    await audioChain;
    const measured = flashes.map((flash) => {
      const nearest = clicks.reduce((best, click) => (Math.abs(click - flash.at) < Math.abs(best - flash.at) ? click : best), Infinity);
      return { phase: flash.phase, offset: Math.round(flash.at - nearest) };
    });
    const context = JSON.stringify({ bound: BOUND_MS, measured, clicks: clicks.length });
    for (let phase = 0; phase < PHASES.length; phase++) {
      // A phase's offsets once its rate has settled: all but its first flash (steps 0, 3, 6, 9 of 12).
      const offsets = measured
        .filter((m) => m.phase === phase)
        .slice(1)
        .map((m) => m.offset);
      expect(offsets.length, context).toBeGreaterThanOrEqual(2);
      for (const offset of offsets)
        expect(Math.abs(offset), `phase ${phase} (step ${PHASES[phase]}× its audio): ${context}`).toBeLessThan(BOUND_MS);
    }
  }, 70_000);
});
