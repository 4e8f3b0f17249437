/**
 * RTP packets ≤ 1200 bytes on the wire (spec), for every codec and the audio track: header,
 * extensions, payload and SRTP tag together (issue 21 part 3). The payload alone used to be
 * capped at 1200, so the packet came to up to 1,234 bytes.
 *
 * Measured on the datagrams themselves: every UDP send in this process goes through
 * `dgram.Socket#send`, which the test wraps to record the size of each RTP packet (RFC 7983: first
 * byte 128–191, second byte outside RTCP's 192–223). The runtime and a werift client run here; the
 * client sends no RTP (the pattern model's tracks are all output), so every RTP datagram recorded
 * is the runtime's. The client negotiates mid and playout-delay, so the first packet of each frame
 * carries the largest extension block the runtime writes.
 */
import dgram from 'node:dgram';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pattern from '../../models/examples/pattern/index.ts';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import { PLAYOUT_DELAY_URI } from '../../runtime/transport/signalling/peer-factory.ts';
import { waitUntil } from '../support/video-probe.ts';
import { openWeriftPeer, type WeriftPeer } from '../support/werift-peer.ts';

const LOOPBACK = '127.0.0.1';
const SDES_MID_URI = 'urn:ietf:params:rtp-hdrext:sdes:mid';

/** Sizes of the RTP datagrams sent, by payload type. */
const sent = new Map<number, number[]>();
const originalSend = dgram.Socket.prototype.send;

function record(message: unknown): void {
  const bytes = Buffer.isBuffer(message)
    ? message
    : message instanceof Uint8Array
      ? Buffer.from(message.buffer, message.byteOffset, message.byteLength)
      : undefined;
  if (bytes === undefined || bytes.length < 12) return;
  const first = bytes[0]!;
  const second = bytes[1]!;
  if (first < 128 || first > 191 || (second >= 192 && second <= 223)) return; // not RTP (STUN, DTLS, RTCP)
  const payloadType = second & 0x7f;
  const sizes = sent.get(payloadType) ?? [];
  sizes.push(bytes.length);
  sent.set(payloadType, sizes);
}

describe.each([
  ['h264', 'video/H264', 'level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f'],
  ['vp8', 'video/VP8', undefined],
  ['h265', 'video/H265', undefined],
] as const)('RTP packet sizes on the wire, %s', (codec, mime, parameters) => {
  let runtime: Runtime;
  let peer: WeriftPeer | undefined;
  beforeAll(async () => {
    sent.clear();
    dgram.Socket.prototype.send = function (this: dgram.Socket, ...args: unknown[]) {
      record(args[0]);
      return (originalSend as (...a: unknown[]) => void).apply(this, args);
    } as typeof dgram.Socket.prototype.send;
    runtime = await startRuntime({
      model: pattern as never,
      port: 0,
      host: LOOPBACK,
      ice: { hostAddresses: [LOOPBACK] },
      playground: false,
      videoCodecs: [codec],
    });
  });
  afterAll(async () => {
    dgram.Socket.prototype.send = originalSend;
    await peer?.close();
    await runtime?.close();
  });

  it('every RTP datagram, video and audio, is at most 1200 bytes, and keyframes do fill packets', async () => {
    peer = await openWeriftPeer(runtime.url, {
      videoMime: mime,
      ...(parameters ? { videoParameters: parameters } : {}),
      headerExtensions: [SDES_MID_URI, PLAYOUT_DELAY_URI],
    });
    expect(peer.video.codecs[0]?.mimeType).toBe(mime);
    const videoType = peer.video.codecs[0]!.payloadType;
    const audioType = peer.transceiver('tone').codecs[0]!.payloadType;
    expect(peer.extensionIds.has(PLAYOUT_DELAY_URI)).toBe(true);
    // Enough media for a few hundred packets, and a frame large enough to fill packets: on a loaded
    // machine the first 200 video packets can be the small black keyframe and deltas that fit a
    // few evenly cut packets (seen once at 1,096 bytes), so wait for the large one too.
    const largest = (): number => Math.max(0, ...(sent.get(videoType) ?? []));
    await waitUntil(
      () => (sent.get(videoType)?.length ?? 0) >= 200 && (sent.get(audioType)?.length ?? 0) >= 50 && largest() > 1100,
      45_000,
      'video and audio RTP, with a video packet over 1,100 bytes',
    );
    const video = sent.get(videoType)!;
    const audio = sent.get(audioType)!;
    expect(Math.max(...video)).toBeLessThanOrEqual(1200);
    expect(Math.max(...audio)).toBeLessThanOrEqual(1200);
    // The budget is used, not dodged: fragments of large frames come close to the limit.
    expect(Math.max(...video)).toBeGreaterThan(1100);
  }, 60_000);
});
