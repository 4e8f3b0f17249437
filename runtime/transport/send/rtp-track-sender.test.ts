import { describe, expect, it } from 'vitest';
import type { RTCRtpTransceiver } from 'werift';
import { ntpTimestamp, RtpTrackSender } from './rtp-track-sender.ts';

describe('ntpTimestamp', () => {
  it('is seconds since 1900 and a binary fraction of the second', () => {
    const atMs = 1234.5;
    const unixMs = performance.timeOrigin + atMs;
    const ntp = ntpTimestamp(atMs);
    const seconds = Number(ntp >> 32n);
    const fraction = Number(ntp & 0xffffffffn) / 2 ** 32;
    expect(seconds).toBe(Math.floor(unixMs / 1000) + 2_208_988_800);
    expect((seconds - 2_208_988_800 + fraction) * 1000).toBeCloseTo(unixMs, 3);
  });

  it('keeps sub-millisecond steps (werift 0.24.4 had whole seconds)', () => {
    const a = ntpTimestamp(10_000);
    const b = ntpTimestamp(10_020);
    const stepMs = (Number(b - a) / 2 ** 32) * 1000;
    expect(stepMs).toBeCloseTo(20, 3);
  });
});

describe('RtpTrackSender frame hook', () => {
  /** A negotiated transceiver whose DTLS is not up yet: what the constructor and sendFrame read. */
  function unconnectedTransceiver(): RTCRtpTransceiver {
    return {
      sender: {
        kind: 'video',
        ssrc: 1234,
        codec: { payloadType: 96, mimeType: 'video/H264' },
        dtlsTransport: { state: 'connecting', srtpStarted: false },
        onGenericNack: { subscribe: () => ({ unSubscribe: () => {} }) },
      },
      headerExtensions: [],
      mid: '0',
      codecs: [],
    } as unknown as RTCRtpTransceiver;
  }

  it('reports every frame handed to sendFrame, sent or not (what media_stats counts), after it is handled', () => {
    let frames = 0;
    const sender = new RtpTrackSender(unconnectedTransceiver(), { onFrameSent: () => frames++ });
    expect(sender.sendFrame([Buffer.alloc(10)], 0)).toBeUndefined();
    expect(sender.sendFrame([], 3000)).toBeUndefined();
    expect(frames).toBe(2);
    sender.close();
    expect(sender.sendFrame([Buffer.alloc(10)], 6000)).toBeUndefined();
    expect(frames).toBe(3);
  });
});
