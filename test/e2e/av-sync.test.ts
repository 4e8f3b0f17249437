/**
 * Audio and video of one session share one clock (issue 3, part 2): a receiver that maps each
 * track's RTP timestamps to wall-clock time through that track's RTCP sender reports — what a
 * browser does to lip-sync — finds the model's simultaneous flash (video) and click (audio) at
 * the same time. A werift peer receives both tracks, decodes the video (H.264, node-av) and the
 * audio (Opus, libopus), and reads the sender reports from RTCP.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RtcpSrPacket, type RtpPacket } from 'werift';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import { createLogger } from '../../server-kit/log.ts';
import { OpusDecoder } from '../../runtime/media/opus.ts';
import model, { HEIGHT, WIDTH } from '../fixtures/av-sync-model.ts';
import { waitUntil } from '../support/video-probe.ts';
import { decodeTrack, openWeriftPeer, type WeriftPeer } from '../support/werift-peer.ts';
import { senderClockOf, wallTime, type SenderClock } from '../support/sender-clock.ts';

const LOOPBACK = '127.0.0.1';

describe('A/V sync through RTCP sender reports', () => {
  let runtime: Runtime;
  let peer: WeriftPeer | undefined;
  beforeAll(async () => {
    runtime = await startRuntime({
      model: model as never,
      port: 0,
      host: LOOPBACK,
      ice: { hostAddresses: [LOOPBACK] },
      playground: false,
      logger: createLogger({ test: 'av-sync' }, 'error'),
    });
  });
  afterAll(async () => {
    await peer?.close();
    await runtime?.close();
  });

  it('puts each flash and its click at the same sender time (|Δ| < 20 ms)', async () => {
    peer = await openWeriftPeer(runtime.url, { videoMime: 'video/H264' });
    const video = peer.transceiver('main_video');
    const audio = peer.transceiver('main_audio');
    const clocks = new Map<number, SenderClock>();
    for (const transceiver of [video, audio]) {
      transceiver.receiver.onRtcp.subscribe((packet) => {
        if (packet instanceof RtcpSrPacket) clocks.set(packet.ssrc, senderClockOf(packet));
      });
    }
    const flashes: number[] = [];
    const clicks: number[] = [];

    // Video: decode, find white frames (a flash is one frame between black ones).
    let videoSsrc = 0;
    peer.onTrackRtp('main_video', (rtp) => (videoSsrc = rtp.header.ssrc));
    let lastWhite = false;
    const decoding = await decodeTrack(peer, 'main_video', 'h264', (frame, unit) => {
      const white = frame.data[(HEIGHT / 2) * WIDTH + WIDTH / 2]! > 128;
      const clock = clocks.get(videoSsrc);
      if (white && !lastWhite && clock) flashes.push(wallTime(clock, unit.timestamp, 90_000));
      lastWhite = white;
    });

    // Audio: decode each 20 ms packet, find the loud one.
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

    try {
      await waitUntil(
        () => flashes.length >= 4 && clicks.length >= 4,
        25_000,
        'four flashes and four clicks after the first sender reports',
      );
    } finally {
      decoding.close();
      audioDecoder.close();
    }
    // Events are a second apart; a flash with no click within half a second came before the
    // first audio sender report (its click was not timed) and is left out.
    const offsets = flashes
      .map((flash) => flash - clicks.reduce((best, click) => (Math.abs(click - flash) < Math.abs(best - flash) ? click : best)))
      .filter((offset) => Math.abs(offset) < 500);
    const context = JSON.stringify({
      offsets: offsets.map((o) => Math.round(o)),
      flashes: flashes.map(Math.round),
      clicks: clicks.map(Math.round),
    });
    expect(offsets.length, context).toBeGreaterThanOrEqual(3);
    // 0 ms here since audio is stamped with its emit time; 40 ms when both were stamped by send time
    // (the audio waits in its queue longer than the video for its pacer).
    for (const offset of offsets) expect(Math.abs(offset), context).toBeLessThan(20);
  }, 40_000);
});
