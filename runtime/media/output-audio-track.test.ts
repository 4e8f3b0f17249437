/**
 * OutputAudioTrack.place(): a step's audio that its video keeps time with (video follows audio on
 * adaptive tracks): where it falls on the audio clock, and that its frames are stamped with when
 * they play — so the sender reports' RTP ↔ wall-clock mapping stays one straight line.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../server-kit/log.ts';
import type { AudioFrame } from './frames.ts';
import { AUDIO_FRAME_MS, AUDIO_SAMPLE_RATE, OutputAudioTrack, type AudioSink } from './output-audio-track.ts';

const audio = (ms: number): AudioFrame => ({
  sampleRate: AUDIO_SAMPLE_RATE,
  channels: 1,
  samples: new Int16Array((ms * AUDIO_SAMPLE_RATE) / 1000).fill(1000),
});

let track: OutputAudioTrack | undefined;
afterEach(() => {
  track?.close();
  track = undefined;
});

describe('OutputAudioTrack.place', () => {
  it("places a piece after what is buffered, on the clock's frame grid, and stamps its frames by when they play", async () => {
    track = new OutputAudioTrack({ name: 'main_audio', kind: 'audio', direction: 'recvonly' }, createLogger({}, 'silent'));
    const sent: Array<{ rtp: number; mediaTimeMs: number }> = [];
    const sink: AudioSink = { connectionId: 1, sendFrame: (_payloads, rtp, mediaTimeMs) => void sent.push({ rtp, mediaTimeMs }) };
    track.addSink(sink, { paused: false });
    const first = await track.place([audio(60), audio(40)]);
    const second = await track.place([audio(100)]);
    expect(first.durationMs).toBeCloseTo(100, 6);
    expect(second.durationMs).toBeCloseTo(100, 6);
    // Pieces play back to back: the second starts where the first ends.
    expect(second.startMs - first.startMs).toBeCloseTo(first.durationMs, 6);
    // Due on the clock's next frame: in the future by at most one frame (nothing was buffered).
    const now = performance.now();
    // (Or, on a stalled loop, in the past by at most the frames the clock would still catch up.)
    expect(first.startMs).toBeGreaterThan(now - 5 * AUDIO_FRAME_MS);
    expect(first.startMs).toBeLessThanOrEqual(now + AUDIO_FRAME_MS);

    await new Promise((resolve) => setTimeout(resolve, 400));
    // The first frame with sound is stamped with the placement's start; after it, each frame's
    // stamp moves on exactly as its RTP timestamp does (960 samples = 20 ms; a stalled clock skips
    // both alike).
    const firstSent = sent.findIndex((f) => Math.abs(f.mediaTimeMs - first.startMs) < 1e-6);
    expect(firstSent, JSON.stringify({ first, sent: sent.slice(0, 5) })).toBeGreaterThanOrEqual(0);
    const played = sent.slice(firstSent);
    expect(played.length).toBeGreaterThanOrEqual(10);
    for (const frame of played) {
      const rtpMs = ((frame.rtp - played[0]!.rtp) >>> 0) / (AUDIO_SAMPLE_RATE / 1000);
      expect(frame.mediaTimeMs - first.startMs).toBeCloseTo(rtpMs, 6);
    }
  });

  it('waits for room as emit does: a piece is placed only once what is buffered is at most 200 ms', async () => {
    track = new OutputAudioTrack({ name: 'main_audio', kind: 'audio', direction: 'recvonly' }, createLogger({}, 'silent'));
    await track.place([audio(400)]);
    const asked = performance.now();
    const next = await track.place([audio(20)]);
    // 400 ms were buffered: the second waited until no more than 200 ms were, and plays after them.
    expect(performance.now() - asked).toBeGreaterThanOrEqual(200 - 2 * AUDIO_FRAME_MS);
    expect(next.startMs - performance.now()).toBeLessThanOrEqual(200 + AUDIO_FRAME_MS);
  });
});
