import { describe, expect, it } from 'vitest';
import type { DepacketizedFrame, RtpPacketFields } from './depacketized-frame.ts';
import { H264Depacketizer } from './h264-depacketizer.ts';
import { H264Packetizer, h264NalType, splitAnnexB } from './h264-packetizer.ts';

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
  pick<T>(items: readonly T[]): T {
    return items[this.int(0, items.length - 1)]!;
  }
}

const NAL = { slice: 1, idr: 5, sei: 6, sps: 7, pps: 8, aud: 9, filler: 12 } as const;

/**
 * A NAL unit of `size` bytes (header included) whose body is valid after emulation prevention: no
 * 00 00 0x (x <= 2) inside and no trailing zero, like a real one. Zeros are common on purpose.
 */
function makeNal(rng: Rng, type: number, size: number, options: { firstSlice?: boolean; nri?: number } = {}): Buffer {
  const nal = Buffer.alloc(size);
  nal[0] = ((options.nri ?? 3) << 5) | type;
  let zeros = 0;
  for (let i = 1; i < size; i++) {
    let b = rng.chance(0.2) ? 0 : rng.int(0, 255);
    if (zeros >= 2 && b <= 2) b = 3;
    zeros = b === 0 ? zeros + 1 : 0;
    nal[i] = b;
  }
  if (size > 1 && nal[size - 1] === 0) nal[size - 1] = 0x80;
  // first_mb_in_slice is the slice header's leading ue(v): a leading 1 bit codes 0.
  if ((type === NAL.slice || type === NAL.idr) && size > 1) {
    nal[1] = options.firstSlice ? nal[1]! | 0x80 : nal[1]! & 0x7f;
    if (nal[1] === 0) nal[1] = 0x40; // '01x': first_mb_in_slice 1 or 2, and no zero run to break
  }
  return nal;
}

/** Annex-B with random 3-/4-byte start codes and, sometimes, extra leading and trailing zeros. */
function toAnnexB(rng: Rng, nals: readonly Buffer[]): Buffer {
  const parts: Buffer[] = [];
  if (rng.chance(0.2)) parts.push(Buffer.alloc(rng.int(1, 3)));
  for (const nal of nals) {
    parts.push(rng.chance(0.5) ? Buffer.from([0, 0, 0, 1]) : Buffer.from([0, 0, 1]), nal);
    if (rng.chance(0.1)) parts.push(Buffer.alloc(rng.int(1, 4))); // trailing_zero_8bits
  }
  return Buffer.concat(parts);
}

/** What the depacketizer should produce: 4-byte start codes, AUDs gone. */
function expectedAnnexB(nals: readonly Buffer[]): Buffer {
  const parts: Buffer[] = [];
  for (const nal of nals) if (h264NalType(nal) !== NAL.aud) parts.push(Buffer.from([0, 0, 0, 1]), nal);
  return Buffer.concat(parts);
}

/** A slice size biased towards packet-size boundaries. */
function sliceSize(rng: Rng, max: number, allowHuge: boolean): number {
  const r = rng.next();
  if (allowHuge && r < 0.03) return 200 * 1024 + rng.int(0, 100);
  if (r < 0.35) return Math.max(2, max + rng.int(-4, 4)); // around the single-packet limit
  if (r < 0.45) return Math.max(2, 2 * (max - 2) + rng.int(-2, 3)); // around two FU-A fragments
  if (r < 0.6) return rng.int(2, 12);
  return rng.int(2, 6 * max);
}

function randomAccessUnit(rng: Rng, key: boolean, max: number, allowHuge = true): Buffer[] {
  const nals: Buffer[] = [];
  if (rng.chance(0.3)) nals.push(Buffer.from([NAL.aud, rng.pick([0x10, 0x30, 0xf0])]));
  if (rng.chance(0.3)) nals.push(makeNal(rng, NAL.sei, rng.chance(0.2) ? 1 : rng.int(2, 60), { nri: 0 }));
  if (key) {
    nals.push(makeNal(rng, NAL.sps, rng.int(8, 30)));
    nals.push(makeNal(rng, NAL.pps, rng.int(4, 8)));
  }
  const slices = rng.int(1, 3);
  for (let s = 0; s < slices; s++) {
    nals.push(makeNal(rng, key ? NAL.idr : NAL.slice, sliceSize(rng, max, allowHuge), { firstSlice: s === 0 }));
  }
  if (rng.chance(0.1)) nals.push(makeNal(rng, NAL.filler, 1, { nri: 0 })); // a 1-byte NAL unit
  return nals;
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

function pushAll(depacketizer: H264Depacketizer, packets: readonly RtpPacketFields[]): DepacketizedFrame[] {
  const frames: DepacketizedFrame[] = [];
  for (const packet of packets) {
    const frame = depacketizer.push(packet);
    if (frame) frames.push(frame);
  }
  return frames;
}

function nalType(payload: Buffer): number {
  return payload[0]! & 0x1f;
}

/** The NAL units inside a STAP-A payload. */
function stapANals(payload: Buffer): Buffer[] {
  expect(nalType(payload)).toBe(24);
  const nals: Buffer[] = [];
  let offset = 1;
  while (offset < payload.length) {
    const size = payload.readUInt16BE(offset);
    nals.push(payload.subarray(offset + 2, offset + 2 + size));
    offset += 2 + size;
  }
  expect(offset).toBe(payload.length);
  return nals;
}

/** Checks the invariants every payload must satisfy. */
function checkPayload(payload: Buffer, max: number): void {
  expect(payload.length).toBeGreaterThan(0);
  expect(payload.length).toBeLessThanOrEqual(max);
  const type = nalType(payload);
  expect(type === 24 || type === 28 || (type >= 1 && type <= 23 && type !== NAL.aud)).toBe(true);
  if (type === 28) expect(payload.length).toBeGreaterThan(2);
}

const annexB = (...nals: Buffer[]): Buffer => expectedAnnexB(nals);

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

// ---------------------------------------------------------------------------------------------

describe('splitAnnexB', () => {
  it('splits on 3- and 4-byte start codes and drops trailing zero bytes', () => {
    const buf = Buffer.from([0, 0, 0, 1, 0x67, 1, 2, 0, 0, 1, 0x68, 3, 0, 0, 0, 1, 0x65, 4, 5, 0, 0]);
    expect(splitAnnexB(buf).map((n) => [...n])).toEqual([
      [0x67, 1, 2],
      [0x68, 3],
      [0x65, 4, 5],
    ]);
  });

  it('skips leading zeros and bytes before the first start code', () => {
    const buf = Buffer.from([0xaa, 0, 0, 0, 0, 0, 1, 0x41, 9, 0, 0, 0, 0, 0, 1, 0x41, 8]);
    expect(splitAnnexB(buf).map((n) => [...n])).toEqual([
      [0x41, 9],
      [0x41, 8],
    ]);
  });

  it('keeps emulation-prevented zeros inside a NAL unit', () => {
    const buf = Buffer.from([0, 0, 1, 0x41, 0, 0, 3, 0, 0, 3, 1, 7]);
    expect(splitAnnexB(buf).map((n) => [...n])).toEqual([[0x41, 0, 0, 3, 0, 0, 3, 1, 7]]);
  });

  it('returns nothing without a start code, for empty input, and for empty NAL units', () => {
    expect(splitAnnexB(Buffer.from([0x41, 1, 2]))).toEqual([]);
    expect(splitAnnexB(Buffer.alloc(0))).toEqual([]);
    expect(splitAnnexB(Buffer.from([0, 0, 1, 0, 0, 0, 1]))).toEqual([]);
    expect(splitAnnexB(Buffer.from([0, 0, 1, 0, 0, 1, 0x09, 0xf0])).map((n) => [...n])).toEqual([[0x09, 0xf0]]);
  });

  it('returns views into the input, not copies', () => {
    const buf = Buffer.from([0, 0, 0, 1, 0x67, 1, 0, 0, 1, 0x68, 2]);
    for (const nal of splitAnnexB(buf)) expect(nal.buffer).toBe(buf.buffer);
  });

  it('round-trips random access units', () => {
    const rng = new Rng(7);
    for (let i = 0; i < 200; i++) {
      const nals = randomAccessUnit(rng, rng.chance(0.3), 1200, false);
      const split = splitAnnexB(toAnnexB(rng, nals));
      expect(split).toHaveLength(nals.length);
      split.forEach((nal, k) => expectBytes(nal, nals[k]!));
    }
  });
});

describe('h264NalType', () => {
  it('reads the low five bits of the NAL header', () => {
    expect(h264NalType(Buffer.from([0x67]))).toBe(7);
    expect(h264NalType(Buffer.from([0x68, 0xce]))).toBe(8);
    expect(h264NalType(Buffer.from([0x65]))).toBe(5);
    expect(h264NalType(Buffer.from([0x41]))).toBe(1);
    expect(h264NalType(Buffer.from([0x7c]))).toBe(28);
    expect(h264NalType(Buffer.alloc(0))).toBe(-1);
  });
});

describe('H264Packetizer', () => {
  it('rejects payload limits too small for FU-A', () => {
    expect(() => new H264Packetizer(2)).toThrow(RangeError);
    expect(() => new H264Packetizer(100.5)).toThrow(RangeError);
    expect(new H264Packetizer(3).maxPayloadBytes).toBe(3);
    expect(new H264Packetizer().maxPayloadBytes).toBe(1200);
  });

  it('aggregates SPS and PPS into one STAP-A and fragments a large IDR with FU-A', () => {
    const rng = new Rng(1);
    const sps = makeNal(rng, NAL.sps, 20);
    const pps = makeNal(rng, NAL.pps, 5, { nri: 2 });
    const idr = makeNal(rng, NAL.idr, 5000, { firstSlice: true });
    const payloads = new H264Packetizer().packetize(annexB(sps, pps, idr));
    expect(stapANals(payloads[0]!)).toEqual([sps, pps]);
    expect(payloads[0]![0]).toBe(0x60 | 24); // NRI: the larger of the two (3)
    expect(payloads.slice(1).every((p) => nalType(p) === 28)).toBe(true);
  });

  it('aggregates small slices with the parameter sets when everything fits', () => {
    const rng = new Rng(2);
    const nals = [makeNal(rng, NAL.sps, 15), makeNal(rng, NAL.pps, 4), makeNal(rng, NAL.idr, 300, { firstSlice: true })];
    const payloads = new H264Packetizer().packetize(annexB(...nals));
    expect(payloads).toHaveLength(1);
    expect(stapANals(payloads[0]!)).toEqual(nals);
  });

  it('starts a new packet rather than separate SPS from PPS', () => {
    const rng = new Rng(3);
    // SEI + SPS would fit in a STAP-A (1 + 1182 + 14 = 1197), but then the PPS would not.
    const sei = makeNal(rng, NAL.sei, 1180, { nri: 0 });
    const sps = makeNal(rng, NAL.sps, 12);
    const pps = makeNal(rng, NAL.pps, 6);
    const payloads = new H264Packetizer().packetize(annexB(sei, sps, pps));
    expect(payloads).toHaveLength(2);
    expect(payloads[0]).toEqual(sei);
    expect(stapANals(payloads[1]!)).toEqual([sps, pps]);
  });

  it('sets F/NRI in STAP-A headers per RFC 6184 §5.7 (F = OR, NRI = max)', () => {
    const a = Buffer.from([0x80 | 0x20 | NAL.sei, 1]);
    const b = Buffer.from([0x40 | NAL.slice, 0x80]);
    const [payload] = new H264Packetizer().packetize(annexB(a, b));
    expect(payload![0]).toBe(0x80 | 0x40 | 24);
  });

  it('fragments with FU-A: S on the first, E on the last, header type and F/NRI carried over', () => {
    const rng = new Rng(4);
    for (const size of [1201, 1202, 2397, 2398, 2399, 5000, 200 * 1024]) {
      for (const header of [0x65, 0x41, 0x01, 0xe5]) {
        const nal = makeNal(rng, header & 0x1f, size, { firstSlice: true });
        nal[0] = header;
        const payloads = new H264Packetizer(1200).packetize(annexB(nal));
        expect(payloads.length).toBe(Math.ceil((size - 1) / 1198));
        const body: Buffer[] = [];
        payloads.forEach((p, i) => {
          expect(p.length).toBeLessThanOrEqual(1200);
          expect(p[0]).toBe((header & 0xe0) | 28);
          const fu = p[1]!;
          expect((fu & 0x80) !== 0).toBe(i === 0);
          expect((fu & 0x40) !== 0).toBe(i === payloads.length - 1);
          expect(fu & 0x20).toBe(0); // R bit
          expect(fu & 0x1f).toBe(header & 0x1f);
          body.push(p.subarray(2));
        });
        expectBytes(Buffer.concat([Buffer.from([header]), ...body]), nal);
        // Balanced: no tiny trailing fragment.
        const sizes = payloads.map((p) => p.length);
        expect(Math.max(...sizes) - Math.min(...sizes)).toBeLessThanOrEqual(1);
      }
    }
  });

  it('handles exact packet-size boundaries', () => {
    const rng = new Rng(5);
    const max = 1200;
    const packetizer = new H264Packetizer(max);

    const exact = makeNal(rng, NAL.slice, max, { firstSlice: true });
    const input = annexB(exact);
    const [single, ...rest] = packetizer.packetize(input);
    expect(rest).toEqual([]);
    expect(single).toEqual(exact);
    expect(single!.buffer).toBe(input.buffer); // single NAL unit packets are not copied

    expect(packetizer.packetize(annexB(makeNal(rng, NAL.slice, max + 1))).map(nalType)).toEqual([28, 28]);

    // Two NAL units whose STAP-A is exactly max bytes: 1 + (2 + a) + (2 + b) = max.
    const a = makeNal(rng, NAL.sei, 600, { nri: 0 });
    const b = makeNal(rng, NAL.slice, max - 5 - 600, { firstSlice: true });
    const stap = packetizer.packetize(annexB(a, b));
    expect(stap).toHaveLength(1);
    expect(stap[0]!.length).toBe(max);
    expect(stapANals(stap[0]!)).toEqual([a, b]);

    const b2 = makeNal(rng, NAL.slice, max - 5 - 600 + 1, { firstSlice: true });
    expect(packetizer.packetize(annexB(a, b2))).toEqual([a, b2]);
  });

  it("leaves one access unit's payloads intact when the same packetizer packetizes the next ones (nothing shared between calls)", () => {
    const rng = new Rng(21);
    const packetizer = new H264Packetizer(1144);
    const first = [makeNal(rng, NAL.sps, 15), makeNal(rng, NAL.pps, 4), makeNal(rng, NAL.idr, 9000, { firstSlice: true })];
    const payloads = packetizer.packetize(annexB(...first));
    const copies = payloads.map((p) => Buffer.from(p));
    for (let i = 0; i < 10; i++) packetizer.packetize(annexB(makeNal(rng, NAL.slice, 3000 + i * 500, { firstSlice: true })));
    expect(payloads.map((p) => Buffer.from(p))).toEqual(copies);
  });

  it('drops access unit delimiters', () => {
    const packetizer = new H264Packetizer();
    expect(packetizer.packetize(Buffer.from([0, 0, 0, 1, 0x09, 0xf0]))).toEqual([]);
    const slice = Buffer.from([0x41, 0x9a, 0x12]);
    expect(packetizer.packetize(Buffer.from([0, 0, 0, 1, 0x09, 0xf0, 0, 0, 0, 1, ...slice]))).toEqual([slice]);
    expect(packetizer.packetize(Buffer.alloc(0))).toEqual([]);
  });

  for (const seed of [11, 12, 13, 14]) {
    it(`keeps every payload within the limit for random access units (seed ${seed})`, () => {
      const rng = new Rng(seed);
      for (const max of [3, 4, 7, 64, 500, 1200, 1400]) {
        const packetizer = new H264Packetizer(max);
        for (let i = 0; i < 60; i++) {
          const nals = randomAccessUnit(rng, rng.chance(0.3), max, false);
          const payloads = packetizer.packetize(toAnnexB(rng, nals));
          for (const payload of payloads) checkPayload(payload, max);
        }
      }
    });
  }
});

describe('H264Depacketizer', () => {
  for (const seed of [101, 102, 103]) {
    for (const max of [1200, 100, 9]) {
      it(`round-trips random access units (seed ${seed}, max ${max}) across a sequence wrap`, () => {
        const rng = new Rng(seed);
        const packetizer = new H264Packetizer(max);
        const depacketizer = new H264Depacketizer();
        const sender = new Sender(65_536 - 40);
        const count = max === 1200 ? 120 : 40;
        let packetCount = 0;
        for (let i = 0; i < count; i++) {
          const key = i === 0 || rng.chance(0.15);
          const nals = randomAccessUnit(rng, key, max, max === 1200);
          const payloads = packetizer.packetize(toAnnexB(rng, nals));
          for (const payload of payloads) checkPayload(payload, max);
          const packets = sender.frame(payloads);
          packetCount += packets.length;
          const timestamp = packets[0]!.timestamp;
          packets.forEach((packet, k) => {
            const frame = depacketizer.push(packet);
            if (k < packets.length - 1) {
              expect(frame).toBeUndefined();
              return;
            }
            expect(frame).toBeDefined();
            expectBytes(frame!.data, expectedAnnexB(nals));
            expect(frame!.keyframe).toBe(key);
            expect(frame!.timestamp).toBe(timestamp);
          });
          expect(depacketizer.needsKeyframe).toBe(false);
        }
        expect(packetCount).toBeGreaterThan(40); // the sequence numbers did wrap
      });
    }
  }

  it('reassembles a 200 KB IDR across the 65535 -> 0 wrap', () => {
    const rng = new Rng(8);
    const nals = [makeNal(rng, NAL.sps, 20), makeNal(rng, NAL.pps, 6), makeNal(rng, NAL.idr, 200 * 1024, { firstSlice: true })];
    const payloads = new H264Packetizer().packetize(annexB(...nals));
    const packets = new Sender(65_480).frame(payloads);
    expect(packets.some((p) => p.sequenceNumber === 65_535)).toBe(true);
    expect(packets.some((p) => p.sequenceNumber === 0)).toBe(true);
    const frames = pushAll(new H264Depacketizer(), packets);
    expect(frames).toHaveLength(1);
    expectBytes(frames[0]!.data, annexB(...nals));
    expect(frames[0]!.keyframe).toBe(true);
  });

  /** key, P, P, ... built from small access units so each frame spans a few packets. */
  function stream(rng: Rng, pattern: string, max = 300): { nals: Buffer[][]; payloads: Buffer[][] } {
    const packetizer = new H264Packetizer(max);
    const nals = [...pattern].map((c) => {
      const key = c === 'K';
      const au: Buffer[] = key ? [makeNal(rng, NAL.sps, 12), makeNal(rng, NAL.pps, 5)] : [];
      au.push(makeNal(rng, key ? NAL.idr : NAL.slice, rng.int(700, 1500), { firstSlice: true }));
      au.push(makeNal(rng, key ? NAL.idr : NAL.slice, rng.int(200, 280)));
      return au;
    });
    return { nals, payloads: nals.map((au) => packetizer.packetize(annexB(...au))) };
  }

  it('drops a frame that lost a packet, withholds until the next keyframe, then recovers', () => {
    const rng = new Rng(20);
    const { nals, payloads } = stream(rng, 'KPPPPKP');
    const sender = new Sender(65_530);
    const depacketizer = new H264Depacketizer();
    const delivered: (DepacketizedFrame | undefined)[] = [];
    const needsKeyframeAfter: boolean[] = [];
    payloads.forEach((au, i) => {
      let packets = sender.frame(au);
      if (i === 2) packets = packets.filter((_, k) => k !== 2); // lose one packet mid-frame
      const frames = pushAll(depacketizer, packets);
      expect(frames.length).toBeLessThanOrEqual(1);
      delivered.push(frames[0]);
      needsKeyframeAfter.push(depacketizer.needsKeyframe);
    });
    expect(delivered.map((f) => f !== undefined)).toEqual([true, true, false, false, false, true, true]);
    expect(needsKeyframeAfter).toEqual([false, false, true, true, true, false, false]);
    expect(delivered[5]!.keyframe).toBe(true);
    expect(delivered[5]!.data).toEqual(annexB(...nals[5]!));
    expect(delivered[6]!.data).toEqual(annexB(...nals[6]!));
  });

  it('sets needsKeyframe as soon as the gap is seen', () => {
    const rng = new Rng(21);
    const { payloads } = stream(rng, 'KP');
    const sender = new Sender();
    const depacketizer = new H264Depacketizer();
    pushAll(depacketizer, sender.frame(payloads[0]!));
    const packets = sender.frame(payloads[1]!);
    expect(packets.length).toBeGreaterThan(3);
    depacketizer.push(packets[0]!);
    expect(depacketizer.needsKeyframe).toBe(false);
    depacketizer.push(packets[2]!);
    expect(depacketizer.needsKeyframe).toBe(true);
  });

  it('drops a frame whose marker packet was lost but keeps a keyframe that follows', () => {
    const rng = new Rng(22);
    const { nals, payloads } = stream(rng, 'KPKP');
    const sender = new Sender();
    const depacketizer = new H264Depacketizer();
    expect(pushAll(depacketizer, sender.frame(payloads[0]!))).toHaveLength(1);
    const lossy = sender.frame(payloads[1]!);
    expect(pushAll(depacketizer, lossy.slice(0, -1))).toEqual([]);
    // The keyframe's first packet is a STAP-A starting with an SPS: evidently a frame start.
    const key = pushAll(depacketizer, sender.frame(payloads[2]!));
    expect(key).toHaveLength(1);
    expect(key[0]!.data).toEqual(annexB(...nals[2]!));
    expect(depacketizer.needsKeyframe).toBe(false);
    expect(pushAll(depacketizer, sender.frame(payloads[3]!))).toHaveLength(1);
  });

  it('drops a keyframe that lost its last packet, though the next packet starts a new frame', () => {
    const rng = new Rng(31);
    const { payloads } = stream(rng, 'KK');
    const sender = new Sender();
    const depacketizer = new H264Depacketizer({ requireInitialKeyframe: false });
    const first = sender.frame(payloads[0]!);
    expect(pushAll(depacketizer, first.slice(0, -1))).toEqual([]);
    expect(depacketizer.needsKeyframe).toBe(false); // a lost tail is only visible from the next packet
    const second = pushAll(depacketizer, sender.frame(payloads[1]!));
    expect(second.map((f) => f.timestamp)).toEqual([first[0]!.timestamp + 3000]);
    expect(depacketizer.needsKeyframe).toBe(false);
  });

  it('drops a frame whose first packet was lost even though the rest look complete', () => {
    const rng = new Rng(23);
    const sender = new Sender();
    const depacketizer = new H264Depacketizer();
    const packetizer = new H264Packetizer();
    const key = [makeNal(rng, NAL.sps, 12), makeNal(rng, NAL.pps, 5), makeNal(rng, NAL.idr, 900, { firstSlice: true })];
    expect(pushAll(depacketizer, sender.frame(packetizer.packetize(annexB(...key))))).toHaveLength(1);
    // An IDR picture in two single-NAL packets; the first (first_mb_in_slice = 0) is lost.
    const idrAgain = [makeNal(rng, NAL.idr, 1000, { firstSlice: true }), makeNal(rng, NAL.idr, 1000)];
    const packets = sender.frame(packetizer.packetize(annexB(...idrAgain)));
    expect(packets).toHaveLength(2);
    expect(depacketizer.push(packets[1]!)).toBeUndefined();
    expect(depacketizer.needsKeyframe).toBe(true);
  });

  it('drops a frame whose FU-A lacks its end or its start, without any sequence gap', () => {
    const fuStart = Buffer.from([0x7c, 0x85, 0x81, 2, 3]);
    const fuMiddle = Buffer.from([0x7c, 0x05, 4, 5]);
    const fuEnd = Buffer.from([0x7c, 0x45, 6]);
    const single = Buffer.from([0x65, 0x88, 7]);

    /** A depacketizer that has already delivered one good keyframe, so sequence tracking is primed. */
    const primed = (sender: Sender): H264Depacketizer => {
      const d = new H264Depacketizer();
      expect(pushAll(d, sender.frame([single]))).toHaveLength(1);
      expect(d.needsKeyframe).toBe(false);
      return d;
    };

    for (const broken of [
      [fuStart, single], // the FU-A never ended before another NAL unit
      [fuStart, single, fuEnd], // ...even if an end turns up after it
      [fuMiddle, fuEnd], // the frame starts with an FU-A continuation
      [single, fuMiddle, fuEnd], // an FU-A continuation without a start mid-frame
      [fuStart, fuMiddle], // the marker arrives while the FU-A is still open
      [fuStart, fuStart, fuEnd], // two starts in a row
      [fuStart, Buffer.from([0x7c, 0x41, 6])], // the end names another NAL type
    ]) {
      const sender = new Sender(65_535, 1000);
      const d = primed(sender);
      expect(pushAll(d, sender.frame(broken))).toEqual([]);
      expect(d.needsKeyframe).toBe(true);
      // And the next keyframe recovers.
      expect(pushAll(d, sender.frame([single]))).toHaveLength(1);
      expect(d.needsKeyframe).toBe(false);
    }

    const sender = new Sender(65_535, 1000);
    const d = primed(sender);
    const frames = pushAll(d, sender.frame([fuStart, fuMiddle, fuEnd]));
    expect(frames).toHaveLength(1);
    expect([...frames[0]!.data]).toEqual([0, 0, 0, 1, 0x65, 0x81, 2, 3, 4, 5, 6]);
    expect(frames[0]!.keyframe).toBe(true);
  });

  it('ignores duplicated packets and late packets with an older sequence number', () => {
    const rng = new Rng(24);
    const { nals, payloads } = stream(rng, 'KPPK');
    const sender = new Sender(65_533);
    const depacketizer = new H264Depacketizer();
    const sent: RtpPacketFields[] = [];
    const frames: DepacketizedFrame[] = [];
    for (const au of payloads) {
      for (const packet of sender.frame(au)) {
        sent.push(packet);
        for (const p of [packet, packet]) {
          const frame = depacketizer.push(p);
          if (frame) frames.push(frame);
        }
        // A straggler from a few packets back.
        if (sent.length > 3) expect(depacketizer.push(sent[sent.length - 3]!)).toBeUndefined();
      }
    }
    expect(frames.map((f) => f.data)).toEqual(nals.map((au) => annexB(...au)));
    expect(depacketizer.needsKeyframe).toBe(false);
  });

  it('emits a frame on a timestamp change when the sender sets no marker bits', () => {
    const rng = new Rng(25);
    const { nals, payloads } = stream(rng, 'KPP');
    const sender = new Sender();
    const depacketizer = new H264Depacketizer();
    const frames = payloads.map((au) => pushAll(depacketizer, sender.frame(au, false)));
    expect(frames.map((f) => f.length)).toEqual([0, 1, 1]);
    expect(frames[1]![0]!.data).toEqual(annexB(...nals[0]!));
    expect(frames[2]![0]!.data).toEqual(annexB(...nals[1]!));
  });

  it('returns both frames when one packet ends a marker-less frame and completes its own', () => {
    const sender = new Sender(0, 0);
    const depacketizer = new H264Depacketizer({ requireInitialKeyframe: false });
    const a = Buffer.from([0x41, 0x80, 1]);
    const b = Buffer.from([0x41, 0x80, 2]);
    const c = Buffer.from([0x41, 0x80, 3]);
    expect(depacketizer.push(sender.frame([a], false)[0]!)).toBeUndefined();
    expect(depacketizer.push(sender.frame([b], true)[0]!)?.data).toEqual(annexB(a));
    expect(depacketizer.push(sender.frame([c], true)[0]!)?.data).toEqual(annexB(b));
    expect(depacketizer.push(sender.frame([Buffer.alloc(0)], false)[0]!)?.data).toEqual(annexB(c));
  });

  it('withholds frames until the first keyframe unless told not to', () => {
    const rng = new Rng(26);
    const { payloads } = stream(rng, 'PPKP');
    let sender = new Sender();
    const strict = new H264Depacketizer();
    expect(payloads.map((au) => pushAll(strict, sender.frame(au)).length)).toEqual([0, 0, 1, 1]);

    sender = new Sender();
    const strictFlags: boolean[] = [];
    const strict2 = new H264Depacketizer();
    for (const au of payloads) {
      pushAll(strict2, sender.frame(au));
      strictFlags.push(strict2.needsKeyframe);
    }
    expect(strictFlags).toEqual([true, true, false, false]);

    sender = new Sender();
    const lenient = new H264Depacketizer({ requireInitialKeyframe: false });
    expect(payloads.map((au) => pushAll(lenient, sender.frame(au)).length)).toEqual([1, 1, 1, 1]);
    expect(lenient.needsKeyframe).toBe(false);
  });

  it('ends a keyframe wait on an SPS without IDR, flagged keyframe: false', () => {
    const rng = new Rng(27);
    const sender = new Sender();
    const depacketizer = new H264Depacketizer();
    const packetizer = new H264Packetizer();
    const p = [makeNal(rng, NAL.slice, 50, { firstSlice: true })];
    expect(pushAll(depacketizer, sender.frame(packetizer.packetize(annexB(...p))))).toEqual([]);
    expect(depacketizer.needsKeyframe).toBe(true);
    const recovery = [makeNal(rng, NAL.sps, 12), makeNal(rng, NAL.pps, 5), makeNal(rng, NAL.slice, 80, { firstSlice: true })];
    const frames = pushAll(depacketizer, sender.frame(packetizer.packetize(annexB(...recovery))));
    expect(frames).toHaveLength(1);
    expect(frames[0]!.keyframe).toBe(false);
    expect(depacketizer.needsKeyframe).toBe(false);
  });

  it('treats interleaved-mode packet types as loss and ignores undefined types', () => {
    const sender = new Sender();
    const idr = Buffer.from([0x65, 0x88, 1]);
    for (const type of [25, 26, 27, 29]) {
      const d = new H264Depacketizer({ requireInitialKeyframe: false });
      expect(pushAll(d, sender.frame([idr, Buffer.from([0x60 | type, 0, 1, 2])]))).toEqual([]);
      expect(d.needsKeyframe).toBe(true);
    }
    for (const type of [0, 30, 31]) {
      const d = new H264Depacketizer();
      const frames = pushAll(d, sender.frame([idr, Buffer.from([type, 9, 9])]));
      expect(frames.map((f) => f.data)).toEqual([annexB(idr)]);
      expect(d.needsKeyframe).toBe(false);
    }
  });

  it('treats malformed STAP-A payloads as loss', () => {
    const idr = Buffer.from([0x65, 0x88, 1]);
    for (const bad of [
      Buffer.from([0x78]), // no NAL units
      Buffer.from([0x78, 0, 5, 0x65, 1]), // size beyond the payload
      Buffer.from([0x78, 0, 2, 0x67, 1, 0]), // dangling size byte
      Buffer.from([0x78, 0, 0, 0, 2, 0x67, 1]), // zero size
    ]) {
      const d = new H264Depacketizer({ requireInitialKeyframe: false });
      expect(pushAll(d, new Sender().frame([idr, bad]))).toEqual([]);
      expect(d.needsKeyframe).toBe(true);
    }
  });

  it('skips padding-only (empty) packets without seeing a gap', () => {
    const rng = new Rng(28);
    const { nals, payloads } = stream(rng, 'KP');
    const sender = new Sender(65_534);
    const depacketizer = new H264Depacketizer();
    const frames = pushAll(depacketizer, [
      ...sender.frame(payloads[0]!),
      ...sender.frame([Buffer.alloc(0), Buffer.alloc(0)], false),
      ...sender.frame(payloads[1]!),
    ]);
    expect(frames.map((f) => f.data)).toEqual([annexB(...nals[0]!), annexB(...nals[1]!)]);
    expect(depacketizer.needsKeyframe).toBe(false);
  });

  it('resynchronises when the sender restarts its sequence numbers behind the old ones', () => {
    const rng = new Rng(29);
    const { payloads } = stream(rng, 'KP'.repeat(40), 100);
    let sender = new Sender(30_000);
    const depacketizer = new H264Depacketizer();
    expect(pushAll(depacketizer, sender.frame(payloads[0]!))).toHaveLength(1);
    sender = new Sender(20_000, 5); // "older" by 10000
    let delivered = 0;
    for (const au of payloads.slice(1)) delivered += pushAll(depacketizer, sender.frame(au)).length;
    expect(delivered).toBeGreaterThan(30);
    expect(depacketizer.needsKeyframe).toBe(false);
  });

  it('drops a frame that grows past maxFrameBytes', () => {
    const rng = new Rng(30);
    const big = [makeNal(rng, NAL.sps, 12), makeNal(rng, NAL.pps, 5), makeNal(rng, NAL.idr, 5000, { firstSlice: true })];
    const d = new H264Depacketizer({ maxFrameBytes: 4096 });
    expect(pushAll(d, new Sender().frame(new H264Packetizer().packetize(annexB(...big))))).toEqual([]);
    expect(d.needsKeyframe).toBe(true);
  });

  it('reassembles a hand-built STAP-A and keeps NAL order', () => {
    const sps = Buffer.from([0x67, 0x42, 0xc0, 0x1f]);
    const pps = Buffer.from([0x68, 0xce, 0x3c, 0x80]);
    const idr = Buffer.from([0x65, 0x88, 0x84]);
    const stap = Buffer.from([0x78, 0, 4, ...sps, 0, 4, ...pps, 0, 3, ...idr]);
    const frames = pushAll(new H264Depacketizer(), new Sender().frame([stap]));
    expect(frames).toHaveLength(1);
    expect(frames[0]!.data).toEqual(annexB(sps, pps, idr));
    expect(frames[0]!.keyframe).toBe(true);
  });
});
