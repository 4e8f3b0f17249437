/**
 * OutputVideoTrack against a recording sink (a stand-in for a WebRTC connection; the encoder is
 * the real libx264): the order and timing of what one viewer receives.
 */
import { describe, expect, it } from 'vitest';
import { createLogger } from '../log.ts';
import { solidI420 } from './frame-convert.ts';
import { OutputVideoTrack, type VideoSink } from './output-video-track.ts';

const WIDTH = 64;
const HEIGHT = 64;

interface Received {
  mediaTimeMs: number;
  rtpTimestamp: number;
  keyframe: boolean;
}

/** H.264 RTP: an IDR slice, or SPS/PPS aggregated ahead of one, opens a keyframe. */
function isKeyframe(payloads: readonly Buffer[]): boolean {
  const first = payloads[0]!;
  const type = first[0]! & 0x1f;
  if (type === 24 || type === 7 || type === 5) return true;
  return type === 28 && (first[1]! & 0x1f) === 5;
}

function recordingSink(received: Received[]): VideoSink {
  return {
    connectionId: 1,
    codec: 'h264',
    sendFrame(payloads, rtpTimestamp, mediaTimeMs) {
      received.push({ mediaTimeMs, rtpTimestamp, keyframe: isKeyframe(payloads) });
      return rtpTimestamp;
    },
  };
}

describe('OutputVideoTrack', () => {
  it('never sends a viewer a frame stamped before one it already has, when a black frame overtakes an encode', async () => {
    const track = new OutputVideoTrack({ name: 'main_video', kind: 'video', direction: 'recvonly', width: WIDTH, height: HEIGHT }, 30, createLogger({}, 'error'));
    const received: Received[] = [];
    const sink = recordingSink(received);
    track.addSink(sink, { paused: false });
    track.sinkReady(sink);
    // A flush from inside the frame tap runs just before that frame is stamped and encoded: its
    // black frame leaves while the encode is in flight, so the encoded frame is the older one.
    let flushes = 0;
    track.setFrameTap(() => {
      if (flushes < 10) {
        flushes++;
        track.flush();
      }
    });
    const picture = solidI420(WIDTH, HEIGHT, 80, 90, 200);
    for (let i = 0; i < 60 && (flushes < 10 || received.length < 25); i++) {
      await track.emit(picture);
    }
    await track.close();

    expect(flushes).toBe(10);
    expect(received.length).toBeGreaterThan(15);
    for (let i = 1; i < received.length; i++) {
      expect(received[i]!.mediaTimeMs, `frame ${i} of ${received.length}`).toBeGreaterThan(received[i - 1]!.mediaTimeMs);
      expect(received[i]!.rtpTimestamp).not.toBe(received[i - 1]!.rtpTimestamp);
    }
    // The picture opens on a keyframe, and each flush's black frame is one.
    expect(received[0]!.keyframe).toBe(true);
    expect(received.filter((r) => r.keyframe).length).toBeGreaterThanOrEqual(flushes);
  }, 30_000);
});
