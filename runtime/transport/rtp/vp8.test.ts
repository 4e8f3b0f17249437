import { describe, expect, it } from 'vitest';
import type { DepacketizedFrame, RtpPacketFields } from './depacketized-frame.ts';
import { Vp8Depacketizer, parseVp8PayloadDescriptor } from './vp8-depacketizer.ts';
import { Vp8Packetizer } from './vp8-packetizer.ts';

// ---------------------------------------------------------------------------------------------
// Helpers

/** Seeded PRNG (mulberry32) so every failure reproduces from the seed printed in the test name. */
class Rng {
  #state: number;
  constructor(seed: number) {
    this.#state = seed >>> 0;
  }
  next(): number {
    this.#state = (this.#state + 0x6d2b79f5) >>> 0;
    let t = this.#state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  /** Integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
}

/** A VP8 frame of `size` random bytes whose frame tag says key (P=0) or inter (P=1) frame. */
function makeFrame(rng: Rng, size: number, key: boolean): Buffer {
  const frame = Buffer.allocUnsafe(size);
  for (let i = 0; i < size; i++) frame[i] = rng.int(0, 255);
  frame[0] = key ? frame[0]! & 0xfe : frame[0]! | 0x01;
  return frame;
}

/** Frame sizes biased towards packet boundaries (`max - 4` bytes of frame fill one packet). */
function frameSize(rng: Rng, max: number, allowHuge: boolean): number {
  const perPacket = max - 4;
  const r = rng.next();
  if (allowHuge && r < 0.05) return 200 * 1024 + rng.int(0, 100);
  if (r < 0.15) return 1;
  if (r < 0.45) return Math.max(1, perPacket + rng.int(-2, 2));
  if (r < 0.6) return Math.max(1, 2 * perPacket + rng.int(-2, 2));
  return rng.int(1, 8 * max);
}

/**
 * Byte equality via Buffer#equals: vitest's deep equality walks buffers element by element, which
 * takes seconds for the 200 KB cases. Reports the first differing offset on failure.
 */
function expectBytes(actual: Buffer | undefined, expected: Buffer): void {
  expect(actual).toBeDefined();
  if (actual!.equals(expected)) return;
  let i = 0;
  while (i < actual!.length && i < expected.length && actual![i] === expected[i]) i++;
  expect.fail(`buffers differ at byte ${i} (lengths ${actual!.length} vs ${expected.length})`);
}

/** Hands out RTP sequence numbers and timestamps the way a sender would, wrapping both. */
class Sender {
  seq: number;
  timestamp: number;
  constructor(seq = 65_500, timestamp = 0xffff_f000) {
    this.seq = seq;
    this.timestamp = timestamp;
  }
  /** One frame's packets; the marker goes on the last unless `marker` is false. */
  frame(payloads: readonly Buffer[], marker = true): RtpPacketFields[] {
    const packets = payloads.map((payload, i) => ({
      payload,
      marker: marker && i === payloads.length - 1,
      sequenceNumber: this.seq++ & 0xffff,
      timestamp: this.timestamp,
    }));
    this.seq &= 0xffff;
    this.timestamp = (this.timestamp + 3000) >>> 0;
    return packets;
  }
}

function pushAll(depacketizer: Vp8Depacketizer, packets: readonly RtpPacketFields[]): DepacketizedFrame[] {
  const frames: DepacketizedFrame[] = [];
  for (const packet of packets) {
    const frame = depacketizer.push(packet);
    if (frame) frames.push(frame);
  }
  return frames;
}

/** The 15-bit PictureID our packetizer writes in bytes 2-3. */
function pictureIdOf(payload: Buffer): number {
  expect(payload[2]! & 0x80).toBe(0x80);
  return ((payload[2]! & 0x7f) << 8) | payload[3]!;
}

// ---------------------------------------------------------------------------------------------

describe('Vp8Packetizer', () => {
  it('rejects payload limits too small for the descriptor plus a byte', () => {
    expect(() => new Vp8Packetizer(4)).toThrow(RangeError);
    expect(() => new Vp8Packetizer(1000.5)).toThrow(RangeError);
    expect(new Vp8Packetizer(5).maxPayloadBytes).toBe(5);
    expect(new Vp8Packetizer().maxPayloadBytes).toBe(1200);
  });

  it('writes the RFC 7741 §4.2 descriptor: X=1, S on the first packet only, PID=0, I=1, M=1', () => {
    const rng = new Rng(1);
    const frame = makeFrame(rng, 3000, true);
    const payloads = new Vp8Packetizer(1200, 0x1234).packetize(frame);
    expect(payloads).toHaveLength(3);
    payloads.forEach((p, i) => {
      expect(p[0]).toBe(i === 0 ? 0x90 : 0x80);
      expect(p[1]).toBe(0x80);
      expect([...p.subarray(2, 4)]).toEqual([0x80 | 0x12, 0x34]);
      const d = parseVp8PayloadDescriptor(p)!;
      expect(d).toMatchObject({ startOfPartition: i === 0, partitionIndex: 0, pictureId: 0x1234, length: 4 });
    });
    expectBytes(Buffer.concat(payloads.map((p) => p.subarray(4))), frame);
    // Balanced split: 3000 bytes over 3 packets.
    expect(payloads.map((p) => p.length)).toEqual([1004, 1004, 1004]);
  });

  it('increments the PictureID per frame and wraps from 0x7fff to 0', () => {
    const packetizer = new Vp8Packetizer(1200, 0x7ffd);
    const ids: number[] = [];
    for (let i = 0; i < 5; i++) {
      const payloads = packetizer.packetize(Buffer.alloc(2500, 1));
      for (const p of payloads) expect(pictureIdOf(p)).toBe(pictureIdOf(payloads[0]!));
      ids.push(pictureIdOf(payloads[0]!));
    }
    expect(ids).toEqual([0x7ffd, 0x7ffe, 0x7fff, 0, 1]);
    expect(packetizer.nextPictureId).toBe(2);
    expect(new Vp8Packetizer(1200, 0x18001).nextPictureId).toBe(1); // masked to 15 bits
  });

  it('sends nothing for an empty frame and does not spend a PictureID on it', () => {
    const packetizer = new Vp8Packetizer();
    expect(packetizer.packetize(Buffer.alloc(0))).toEqual([]);
    expect(packetizer.nextPictureId).toBe(0);
  });

  it('handles exact packet-size boundaries', () => {
    const packetizer = new Vp8Packetizer(1200);
    const exact = packetizer.packetize(Buffer.alloc(1196, 7));
    expect(exact.map((p) => p.length)).toEqual([1200]);
    const over = packetizer.packetize(Buffer.alloc(1197, 7));
    expect(over.map((p) => p.length)).toEqual([603, 602]);
    expect(packetizer.packetize(Buffer.alloc(1, 7)).map((p) => p.length)).toEqual([5]);
    expect(new Vp8Packetizer(5).packetize(Buffer.from([1, 2, 3])).map((p) => [...p])).toEqual([
      [0x90, 0x80, 0x80, 0x00, 1],
      [0x80, 0x80, 0x80, 0x00, 2],
      [0x80, 0x80, 0x80, 0x00, 3],
    ]);
  });

  for (const seed of [11, 12, 13]) {
    it(`keeps every payload within the limit (seed ${seed})`, () => {
      const rng = new Rng(seed);
      for (const max of [5, 6, 64, 1200, 1400]) {
        const packetizer = new Vp8Packetizer(max);
        for (let i = 0; i < 50; i++) {
          const frame = makeFrame(rng, frameSize(rng, max, false), rng.chance(0.2));
          const payloads = packetizer.packetize(frame);
          expect(payloads.length).toBe(Math.ceil(frame.length / (max - 4)));
          for (const p of payloads) {
            expect(p.length).toBeLessThanOrEqual(max);
            expect(p.length).toBeGreaterThan(4);
          }
        }
      }
    });
  }
});

describe('parseVp8PayloadDescriptor (RFC 7741 §4.2)', () => {
  it('parses the one-byte form without extensions', () => {
    expect(parseVp8PayloadDescriptor(Buffer.from([0x10, 0x9d]))).toEqual({
      nonReference: false,
      startOfPartition: true,
      partitionIndex: 0,
      pictureId: undefined,
      tl0PicIdx: undefined,
      temporalLayerId: undefined,
      layerSync: undefined,
      keyIndex: undefined,
      length: 1,
    });
    expect(parseVp8PayloadDescriptor(Buffer.from([0x23, 0]))).toMatchObject({
      nonReference: true,
      startOfPartition: false,
      partitionIndex: 3,
      length: 1,
    });
  });

  it('parses a 7-bit PictureID (M=0)', () => {
    expect(parseVp8PayloadDescriptor(Buffer.from([0x90, 0x80, 0x35, 0]))).toMatchObject({
      startOfPartition: true,
      pictureId: 0x35,
      length: 3,
    });
  });

  it('parses a 15-bit PictureID (M=1)', () => {
    expect(parseVp8PayloadDescriptor(Buffer.from([0x90, 0x80, 0x80 | 0x12, 0x34, 0]))).toMatchObject({ pictureId: 0x1234, length: 4 });
    expect(parseVp8PayloadDescriptor(Buffer.from([0x80, 0x80, 0xff, 0xff, 0]))).toMatchObject({ pictureId: 0x7fff, length: 4 });
  });

  it('parses TL0PICIDX and the TID/Y/KEYIDX byte', () => {
    // I (15-bit), L, T and K: |I|L|T|K| = 0xf0; TID=2, Y=1, KEYIDX=5 -> 10 1 00101.
    expect(parseVp8PayloadDescriptor(Buffer.from([0x90, 0xf0, 0x81, 0x23, 0x2a, 0b1010_0101, 0x9d]))).toEqual({
      nonReference: false,
      startOfPartition: true,
      partitionIndex: 0,
      pictureId: 0x0123,
      tl0PicIdx: 0x2a,
      temporalLayerId: 2,
      layerSync: true,
      keyIndex: 5,
      length: 6,
    });
    // L only.
    expect(parseVp8PayloadDescriptor(Buffer.from([0x80, 0x40, 0x07, 0]))).toMatchObject({
      pictureId: undefined,
      tl0PicIdx: 7,
      temporalLayerId: undefined,
      length: 3,
    });
    // T only: TID=1, Y=0; KEYIDX bits are not meaningful.
    expect(parseVp8PayloadDescriptor(Buffer.from([0x80, 0x20, 0b0101_1111, 0]))).toMatchObject({
      temporalLayerId: 1,
      layerSync: false,
      keyIndex: undefined,
      length: 3,
    });
    // K only, with a 7-bit PictureID.
    expect(parseVp8PayloadDescriptor(Buffer.from([0x80, 0x90, 0x05, 0b1110_0011, 0]))).toMatchObject({
      pictureId: 5,
      temporalLayerId: undefined,
      layerSync: undefined,
      keyIndex: 3,
      length: 4,
    });
    // X set but no extension fields at all.
    expect(parseVp8PayloadDescriptor(Buffer.from([0x90, 0x00, 0]))).toMatchObject({ length: 2 });
  });

  it('rejects descriptors cut short', () => {
    const truncated = [
      [],
      [0x80], // X without its extension byte
      [0x80, 0x80], // I without a PictureID
      [0x80, 0x80, 0x80], // M without the PictureID's second byte
      [0x80, 0x40], // L without TL0PICIDX
      [0x80, 0x20], // T without the TID/Y/KEYIDX byte
      [0x80, 0xd0, 0x01, 0x02], // I, L, then K without its byte
    ];
    for (const bytes of truncated) {
      expect(parseVp8PayloadDescriptor(Buffer.from(bytes))).toBeUndefined();
    }
  });
});

describe('Vp8Depacketizer', () => {
  for (const seed of [101, 102, 103]) {
    for (const max of [1200, 40, 5]) {
      it(`round-trips random frames (seed ${seed}, max ${max}) across a sequence wrap`, () => {
        const rng = new Rng(seed);
        const packetizer = new Vp8Packetizer(max, rng.int(0, 0x7fff));
        const depacketizer = new Vp8Depacketizer();
        const sender = new Sender(65_536 - 30);
        let packetCount = 0;
        for (let i = 0; i < (max === 1200 ? 100 : 30); i++) {
          const key = i === 0 || rng.chance(0.15);
          const frame = makeFrame(rng, frameSize(rng, max, max === 1200), key);
          const payloads = packetizer.packetize(frame);
          for (const p of payloads) expect(p.length).toBeLessThanOrEqual(max);
          const packets = sender.frame(payloads);
          packetCount += packets.length;
          packets.forEach((packet, k) => {
            const out = depacketizer.push(packet);
            if (k < packets.length - 1) {
              expect(out).toBeUndefined();
              return;
            }
            expectBytes(out?.data, frame);
            expect(out!.keyframe).toBe(key);
            expect(out!.timestamp).toBe(packet.timestamp);
          });
          expect(depacketizer.needsKeyframe).toBe(false);
        }
        expect(packetCount).toBeGreaterThan(30); // the sequence numbers did wrap
      });
    }
  }

  it('reassembles hand-built packets with every descriptor form', () => {
    const sender = new Sender(65_534);
    const depacketizer = new Vp8Depacketizer();
    const packets = sender.frame([
      Buffer.from([0x10, 0x50, 0x01]), // S=1, PID=0, no X; VP8 frame tag with P=0: key frame
      Buffer.from([0x80, 0x80, 0x35, 0x02, 0x03]), // X, 7-bit PictureID
      Buffer.from([0x81, 0x80, 0x80 | 0x12, 0x34, 0x04]), // X, 15-bit PictureID, PID=1
      Buffer.from([0x81, 0xf0, 0x81, 0x23, 0x2a, 0b1010_0101, 0x05, 0x06]), // I+L+T+K
      Buffer.from([0x01, 0x07]), // no X, PID=1
    ]);
    const frames = pushAll(depacketizer, packets);
    expect(frames).toHaveLength(1);
    expect([...frames[0]!.data]).toEqual([0x50, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07]);
    expect(frames[0]!.keyframe).toBe(true);
  });

  it('treats a frame as key only when S=1, PID=0 and P=0', () => {
    const sender = new Sender();
    const d = new Vp8Depacketizer({ requireInitialKeyframe: false });
    expect(pushAll(d, sender.frame([Buffer.from([0x10, 0x50])]))[0]!.keyframe).toBe(true);
    expect(pushAll(d, sender.frame([Buffer.from([0x10, 0x51])]))[0]!.keyframe).toBe(false);
    // A later packet's payload byte 0 is not a frame tag.
    expect(pushAll(d, sender.frame([Buffer.from([0x10, 0x51]), Buffer.from([0x00, 0x50])]))[0]!.keyframe).toBe(false);
  });

  /** Frames of a few packets each: 'K' key, 'P' inter. */
  function stream(rng: Rng, pattern: string): { frames: Buffer[]; payloads: Buffer[][] } {
    const packetizer = new Vp8Packetizer(300);
    const frames = [...pattern].map((c) => makeFrame(rng, rng.int(900, 1500), c === 'K'));
    return { frames, payloads: frames.map((f) => packetizer.packetize(f)) };
  }

  it('drops a frame that lost a packet, withholds until the next keyframe, then recovers', () => {
    const rng = new Rng(20);
    const { frames, payloads } = stream(rng, 'KPPPPKP');
    const sender = new Sender(65_530);
    const depacketizer = new Vp8Depacketizer();
    const delivered: (DepacketizedFrame | undefined)[] = [];
    const needsKeyframeAfter: boolean[] = [];
    payloads.forEach((frame, i) => {
      let packets = sender.frame(frame);
      if (i === 2) packets = packets.filter((_, k) => k !== 2); // lose one packet mid-frame
      const out = pushAll(depacketizer, packets);
      expect(out.length).toBeLessThanOrEqual(1);
      delivered.push(out[0]);
      needsKeyframeAfter.push(depacketizer.needsKeyframe);
    });
    expect(delivered.map((f) => f !== undefined)).toEqual([true, true, false, false, false, true, true]);
    expect(needsKeyframeAfter).toEqual([false, false, true, true, true, false, false]);
    expect(delivered[5]!.keyframe).toBe(true);
    expectBytes(delivered[5]!.data, frames[5]!);
    expectBytes(delivered[6]!.data, frames[6]!);
  });

  it('drops a frame whose marker packet was lost but keeps a keyframe that follows', () => {
    const rng = new Rng(21);
    const { frames, payloads } = stream(rng, 'KPKP');
    const sender = new Sender();
    const depacketizer = new Vp8Depacketizer();
    expect(pushAll(depacketizer, sender.frame(payloads[0]!))).toHaveLength(1);
    expect(pushAll(depacketizer, sender.frame(payloads[1]!).slice(0, -1))).toEqual([]);
    const key = pushAll(depacketizer, sender.frame(payloads[2]!));
    expect(key).toHaveLength(1);
    expectBytes(key[0]!.data, frames[2]!);
    expect(depacketizer.needsKeyframe).toBe(false);
    expect(pushAll(depacketizer, sender.frame(payloads[3]!))).toHaveLength(1);
  });

  it('drops a keyframe that lost its last packet, though the next packet starts a new frame', () => {
    const rng = new Rng(26);
    const { payloads } = stream(rng, 'KK');
    const sender = new Sender();
    const depacketizer = new Vp8Depacketizer({ requireInitialKeyframe: false });
    const first = sender.frame(payloads[0]!);
    expect(pushAll(depacketizer, first.slice(0, -1))).toEqual([]);
    const second = pushAll(depacketizer, sender.frame(payloads[1]!));
    expect(second.map((f) => f.timestamp)).toEqual([first[0]!.timestamp + 3000]);
    expect(depacketizer.needsKeyframe).toBe(false);
  });

  it('skips padding-only (empty) packets, even as the very first packet', () => {
    const rng = new Rng(27);
    const { frames, payloads } = stream(rng, 'KP');
    const sender = new Sender(65_534);
    const depacketizer = new Vp8Depacketizer();
    const out = pushAll(depacketizer, [
      ...sender.frame([Buffer.alloc(0)], false),
      ...sender.frame(payloads[0]!),
      ...sender.frame([Buffer.alloc(0), Buffer.alloc(0)], false),
      ...sender.frame(payloads[1]!),
    ]);
    expect(out).toHaveLength(2);
    out.forEach((f, i) => expectBytes(f.data, frames[i]!));
    expect(depacketizer.needsKeyframe).toBe(false);
  });

  it('drops a frame whose first packet was lost', () => {
    const rng = new Rng(22);
    const { payloads } = stream(rng, 'KK');
    const sender = new Sender();
    const depacketizer = new Vp8Depacketizer();
    expect(pushAll(depacketizer, sender.frame(payloads[0]!))).toHaveLength(1);
    expect(pushAll(depacketizer, sender.frame(payloads[1]!).slice(1))).toEqual([]);
    expect(depacketizer.needsKeyframe).toBe(true);
  });

  it('drops a frame that does not begin with S=1, PID=0 even without a sequence gap', () => {
    const sender = new Sender();
    const depacketizer = new Vp8Depacketizer();
    expect(pushAll(depacketizer, sender.frame([Buffer.from([0x10, 0x50])]))).toHaveLength(1);
    expect(pushAll(depacketizer, sender.frame([Buffer.from([0x00, 0x51]), Buffer.from([0x00, 0x52])]))).toEqual([]);
    expect(depacketizer.needsKeyframe).toBe(true);
    // Nor a frame with a second start under the same timestamp.
    expect(pushAll(depacketizer, sender.frame([Buffer.from([0x10, 0x50]), Buffer.from([0x10, 0x50])]))).toEqual([]);
    expect(pushAll(depacketizer, sender.frame([Buffer.from([0x10, 0x50])]))).toHaveLength(1);
    expect(depacketizer.needsKeyframe).toBe(false);
  });

  it('treats truncated descriptors and descriptor-only payloads as loss', () => {
    for (const bad of [[0x80], [0x80, 0x80, 0x80], [0x10], [0x90, 0x80, 0x05]]) {
      const sender = new Sender();
      const d = new Vp8Depacketizer();
      expect(pushAll(d, sender.frame([Buffer.from([0x10, 0x50])]))).toHaveLength(1);
      expect(pushAll(d, sender.frame([Buffer.from([0x10, 0x51]), Buffer.from(bad)]))).toEqual([]);
      expect(d.needsKeyframe).toBe(true);
    }
  });

  it('ignores duplicated packets and late packets with an older sequence number', () => {
    const rng = new Rng(23);
    const { frames, payloads } = stream(rng, 'KPPK');
    const sender = new Sender(65_533);
    const depacketizer = new Vp8Depacketizer();
    const sent: RtpPacketFields[] = [];
    const out: DepacketizedFrame[] = [];
    for (const frame of payloads) {
      for (const packet of sender.frame(frame)) {
        sent.push(packet);
        for (const p of [packet, packet]) {
          const f = depacketizer.push(p);
          if (f) out.push(f);
        }
        if (sent.length > 3) expect(depacketizer.push(sent[sent.length - 3]!)).toBeUndefined();
      }
    }
    expect(out).toHaveLength(frames.length);
    out.forEach((f, i) => expectBytes(f.data, frames[i]!));
    expect(depacketizer.needsKeyframe).toBe(false);
  });

  it('emits a frame on a timestamp change when the sender sets no marker bits', () => {
    const rng = new Rng(24);
    const { frames, payloads } = stream(rng, 'KPP');
    const sender = new Sender();
    const depacketizer = new Vp8Depacketizer();
    const out = payloads.map((p) => pushAll(depacketizer, sender.frame(p, false)));
    expect(out.map((f) => f.length)).toEqual([0, 1, 1]);
    expectBytes(out[1]![0]!.data, frames[0]!);
    expectBytes(out[2]![0]!.data, frames[1]!);
  });

  it('withholds inter frames until the first keyframe unless told not to', () => {
    const rng = new Rng(25);
    const { payloads } = stream(rng, 'PPKP');
    let sender = new Sender();
    const strict = new Vp8Depacketizer();
    const flags: boolean[] = [];
    const counts = payloads.map((p) => {
      const n = pushAll(strict, sender.frame(p)).length;
      flags.push(strict.needsKeyframe);
      return n;
    });
    expect(counts).toEqual([0, 0, 1, 1]);
    expect(flags).toEqual([true, true, false, false]);

    sender = new Sender();
    const lenient = new Vp8Depacketizer({ requireInitialKeyframe: false });
    expect(payloads.map((p) => pushAll(lenient, sender.frame(p)).length)).toEqual([1, 1, 1, 1]);
  });

  it('does not alias the packet buffers in the frame it returns', () => {
    const payload = Buffer.from([0x10, 0x50, 1, 2]);
    const [frame] = pushAll(new Vp8Depacketizer(), new Sender().frame([payload]));
    payload[2] = 99;
    expect([...frame!.data]).toEqual([0x50, 1, 2]);
  });
});
