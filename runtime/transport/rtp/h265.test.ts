import { describe, expect, it } from 'vitest';
import type { DepacketizedFrame, RtpPacketFields } from './depacketized-frame.ts';
import { H265Depacketizer } from './h265-depacketizer.ts';
import { H265Packetizer, h265LayerId, h265NalType, h265Tid } from './h265-packetizer.ts';

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

/** H.265 Table 7-1. */
const NAL = {
  trailR: 1,
  idrWRadl: 19,
  idrNLp: 20,
  cra: 21,
  vps: 32,
  sps: 33,
  pps: 34,
  aud: 35,
  prefixSei: 39,
  suffixSei: 40,
  fd: 38,
} as const;
const AP = 48;
const FU = 49;

function header(type: number, layerId = 0, tid = 1, f = false): [number, number] {
  return [(f ? 0x80 : 0) | (type << 1) | (layerId >> 5), ((layerId & 0x1f) << 3) | tid];
}

/**
 * A NAL unit of `size` bytes (two-byte header included) whose body is valid after emulation
 * prevention: no 00 00 0x (x <= 2) inside and no trailing zero, like a real one. Zeros are common on
 * purpose.
 */
function makeNal(
  rng: Rng,
  type: number,
  size: number,
  options: { firstSlice?: boolean; layerId?: number; tid?: number; f?: boolean } = {},
): Buffer {
  const nal = Buffer.alloc(size);
  [nal[0], nal[1]] = header(type, options.layerId ?? 0, options.tid ?? 1, options.f ?? false);
  let zeros = 0;
  for (let i = 2; i < size; i++) {
    let b = rng.chance(0.2) ? 0 : rng.int(0, 255);
    if (zeros >= 2 && b <= 2) b = 3;
    zeros = b === 0 ? zeros + 1 : 0;
    nal[i] = b;
  }
  if (size > 2 && nal[size - 1] === 0) nal[size - 1] = 0x80;
  // first_slice_segment_in_pic_flag is the slice segment header's leading bit.
  if (type <= 31 && size > 2) {
    nal[2] = options.firstSlice ? nal[2]! | 0x80 : nal[2]! & 0x7f;
    if (nal[2] === 0) nal[2] = 0x40; // no zero run to break
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
  for (const nal of nals) if (h265NalType(nal) !== NAL.aud) parts.push(Buffer.from([0, 0, 0, 1]), nal);
  return Buffer.concat(parts);
}

const annexB = (...nals: Buffer[]): Buffer => expectedAnnexB(nals);

/** A slice size biased towards packet-size boundaries. */
function sliceSize(rng: Rng, max: number, allowHuge: boolean): number {
  const r = rng.next();
  if (allowHuge && r < 0.03) return 200 * 1024 + rng.int(0, 100);
  if (r < 0.35) return Math.max(3, max + rng.int(-4, 4)); // around the single-packet limit
  if (r < 0.45) return Math.max(3, 2 * (max - 3) + 2 + rng.int(-2, 3)); // around two FU fragments
  if (r < 0.6) return rng.int(3, 12);
  return rng.int(3, 6 * max);
}

const IRAP_TYPES = [16, 17, 18, 19, 20, 21];

function randomAccessUnit(rng: Rng, key: boolean, max: number, allowHuge = true): Buffer[] {
  const nals: Buffer[] = [];
  if (rng.chance(0.3)) nals.push(Buffer.from([...header(NAL.aud, 0, 1), rng.pick([0x10, 0x30, 0x50])]));
  if (key) {
    nals.push(makeNal(rng, NAL.vps, rng.int(20, 30)));
    nals.push(makeNal(rng, NAL.sps, rng.int(30, 60)));
    nals.push(makeNal(rng, NAL.pps, rng.int(5, 10)));
  }
  if (rng.chance(0.3)) nals.push(makeNal(rng, NAL.prefixSei, rng.chance(0.2) ? 2 : rng.int(3, 60)));
  const sliceType = key ? rng.pick(IRAP_TYPES) : rng.pick([0, 1, 2, 3, 8, 9]);
  const tid = key ? 1 : rng.int(1, 3);
  const slices = rng.int(1, 3);
  for (let s = 0; s < slices; s++) {
    nals.push(makeNal(rng, sliceType, sliceSize(rng, max, allowHuge), { firstSlice: s === 0, tid }));
  }
  if (rng.chance(0.1)) nals.push(makeNal(rng, NAL.suffixSei, rng.int(2, 20)));
  if (rng.chance(0.1)) nals.push(makeNal(rng, NAL.fd, 2)); // a header-only NAL unit
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

function pushAll(depacketizer: H265Depacketizer, packets: readonly RtpPacketFields[]): DepacketizedFrame[] {
  const frames: DepacketizedFrame[] = [];
  for (const packet of packets) {
    const frame = depacketizer.push(packet);
    if (frame) frames.push(frame);
  }
  return frames;
}

/** The NAL units inside an AP payload (no DONL). */
function apNals(payload: Buffer): Buffer[] {
  expect(h265NalType(payload)).toBe(AP);
  const nals: Buffer[] = [];
  let offset = 2;
  while (offset < payload.length) {
    const size = payload.readUInt16BE(offset);
    nals.push(payload.subarray(offset + 2, offset + 2 + size));
    offset += 2 + size;
  }
  expect(offset).toBe(payload.length);
  expect(nals.length).toBeGreaterThanOrEqual(2); // RFC 7798 §4.4.2: at least two aggregation units
  return nals;
}

/** Checks the invariants every payload must satisfy. */
function checkPayload(payload: Buffer, max: number): void {
  expect(payload.length).toBeGreaterThanOrEqual(2);
  expect(payload.length).toBeLessThanOrEqual(max);
  const type = h265NalType(payload);
  expect(type === AP || type === FU || (type < 48 && type !== NAL.aud)).toBe(true);
  if (type === FU) {
    expect(payload.length).toBeGreaterThan(3);
    expect((payload[2]! & 0xc0) === 0xc0).toBe(false); // S and E never both set
  }
  if (type === AP) apNals(payload);
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

// ---------------------------------------------------------------------------------------------

describe('H.265 NAL header fields', () => {
  it('reads type, LayerId and TID from the two-byte header', () => {
    // VPS as x265 writes it: 40 01.
    expect(h265NalType(Buffer.from([0x40, 0x01]))).toBe(32);
    expect(h265NalType(Buffer.from([0x42, 0x01]))).toBe(33);
    expect(h265NalType(Buffer.from([0x44, 0x01]))).toBe(34);
    expect(h265NalType(Buffer.from([0x28, 0x01]))).toBe(20);
    expect(h265NalType(Buffer.from([0x02, 0x01]))).toBe(1);
    expect(h265NalType(Buffer.from([0x60, 0x01]))).toBe(48);
    expect(h265NalType(Buffer.from([0x62, 0x01]))).toBe(49);
    expect(h265NalType(Buffer.alloc(0))).toBe(-1);
    const h = Buffer.from(header(NAL.trailR, 45, 5, true));
    expect([h265NalType(h), h265LayerId(h), h265Tid(h), h[0]! & 0x80]).toEqual([1, 45, 5, 0x80]);
  });
});

describe('H265Packetizer', () => {
  it('rejects payload limits too small for an FU', () => {
    expect(() => new H265Packetizer(3)).toThrow(RangeError);
    expect(() => new H265Packetizer(100.5)).toThrow(RangeError);
    expect(new H265Packetizer(4).maxPayloadBytes).toBe(4);
    expect(new H265Packetizer().maxPayloadBytes).toBe(1200);
  });

  it('aggregates VPS, SPS and PPS into one AP and fragments a large IDR with FUs', () => {
    const rng = new Rng(1);
    const vps = makeNal(rng, NAL.vps, 24);
    const sps = makeNal(rng, NAL.sps, 40);
    const pps = makeNal(rng, NAL.pps, 7);
    const idr = makeNal(rng, NAL.idrNLp, 5000, { firstSlice: true });
    const payloads = new H265Packetizer().packetize(annexB(vps, sps, pps, idr));
    expect(apNals(payloads[0]!)).toEqual([vps, sps, pps]);
    expect([...payloads[0]!.subarray(0, 2)]).toEqual(header(AP, 0, 1));
    expect(payloads.slice(1).every((p) => h265NalType(p) === FU)).toBe(true);
    expect(payloads).toHaveLength(1 + Math.ceil((5000 - 2) / 1197));
  });

  it('aggregates small slices with the parameter sets when everything fits', () => {
    const rng = new Rng(2);
    const nals = [
      makeNal(rng, NAL.vps, 24),
      makeNal(rng, NAL.sps, 40),
      makeNal(rng, NAL.pps, 7),
      makeNal(rng, NAL.prefixSei, 30),
      makeNal(rng, NAL.idrWRadl, 300, { firstSlice: true }),
    ];
    const payloads = new H265Packetizer().packetize(annexB(...nals));
    expect(payloads).toHaveLength(1);
    expect(apNals(payloads[0]!)).toEqual(nals);
  });

  it('starts a new packet rather than separate the parameter sets', () => {
    const rng = new Rng(3);
    // SEI + VPS + SPS would fit in an AP (2 + 1122 + 26 + 42 = 1192), but then the PPS would not.
    const sei = makeNal(rng, NAL.prefixSei, 1120);
    const vps = makeNal(rng, NAL.vps, 24);
    const sps = makeNal(rng, NAL.sps, 40);
    const pps = makeNal(rng, NAL.pps, 7);
    const payloads = new H265Packetizer().packetize(annexB(sei, vps, sps, pps));
    expect(payloads).toHaveLength(2);
    expect(payloads[0]).toEqual(sei);
    expect(apNals(payloads[1]!)).toEqual([vps, sps, pps]);
  });

  it('sets the AP payload header per RFC 7798 §4.4.2: F = OR, LayerId and TID = lowest', () => {
    const a = Buffer.from([...header(NAL.prefixSei, 3, 4, true), 1]);
    const b = Buffer.from([...header(NAL.trailR, 2, 6), 0x80]);
    const c = Buffer.from([...header(NAL.trailR, 5, 2), 0x80]);
    const [payload] = new H265Packetizer().packetize(annexB(a, b, c));
    expect([...payload!.subarray(0, 2)]).toEqual(header(AP, 2, 2, true));
    expect(apNals(payload!)).toEqual([a, b, c]);
  });

  it('fragments with FUs: S on the first, E on the last, F/LayerId/TID and type carried over', () => {
    const rng = new Rng(4);
    for (const size of [1201, 1202, 2395, 2396, 2397, 5000, 200 * 1024]) {
      for (const [type, layerId, tid, f] of [
        [NAL.idrWRadl, 0, 1, false],
        [NAL.trailR, 0, 3, false],
        [NAL.cra, 63, 7, true],
        [0, 1, 1, false],
      ] as const) {
        const nal = makeNal(rng, type, size, { firstSlice: true, layerId, tid, f });
        const payloads = new H265Packetizer(1200).packetize(annexB(nal));
        expect(payloads.length).toBe(Math.ceil((size - 2) / 1197));
        const body: Buffer[] = [];
        payloads.forEach((p, i) => {
          expect(p.length).toBeLessThanOrEqual(1200);
          expect([...p.subarray(0, 2)]).toEqual(header(FU, layerId, tid, f));
          const fu = p[2]!;
          expect((fu & 0x80) !== 0).toBe(i === 0);
          expect((fu & 0x40) !== 0).toBe(i === payloads.length - 1);
          expect(fu & 0x3f).toBe(type);
          body.push(p.subarray(3));
        });
        expectBytes(Buffer.concat([nal.subarray(0, 2), ...body]), nal);
        // Balanced: no tiny trailing fragment.
        const sizes = payloads.map((p) => p.length);
        expect(Math.max(...sizes) - Math.min(...sizes)).toBeLessThanOrEqual(1);
      }
    }
  });

  it('handles exact packet-size boundaries', () => {
    const rng = new Rng(5);
    const max = 1200;
    const packetizer = new H265Packetizer(max);

    const exact = makeNal(rng, NAL.trailR, max, { firstSlice: true });
    const input = annexB(exact);
    const [single, ...rest] = packetizer.packetize(input);
    expect(rest).toEqual([]);
    expect(single).toEqual(exact);
    expect(single!.buffer).toBe(input.buffer); // single NAL unit packets are not copied

    expect(packetizer.packetize(annexB(makeNal(rng, NAL.trailR, max + 1))).map(h265NalType)).toEqual([FU, FU]);

    // Two NAL units whose AP is exactly max bytes: 2 + (2 + a) + (2 + b) = max.
    const a = makeNal(rng, NAL.prefixSei, 600);
    const b = makeNal(rng, NAL.trailR, max - 6 - 600, { firstSlice: true });
    const ap = packetizer.packetize(annexB(a, b));
    expect(ap).toHaveLength(1);
    expect(ap[0]!.length).toBe(max);
    expect(apNals(ap[0]!)).toEqual([a, b]);

    const b2 = makeNal(rng, NAL.trailR, max - 6 - 600 + 1, { firstSlice: true });
    expect(packetizer.packetize(annexB(a, b2))).toEqual([a, b2]);

    // The smallest limit: one byte of NAL unit per FU.
    const tiny = new H265Packetizer(4).packetize(annexB(Buffer.from([0x02, 0x01, 0x80, 7, 9])));
    expect(tiny.map((p) => [...p])).toEqual([
      [0x62, 0x01, 0x81, 0x80],
      [0x62, 0x01, 0x01, 7],
      [0x62, 0x01, 0x41, 9],
    ]);
  });

  it('drops access unit delimiters, header-less NAL units and the unspecified types 48..63', () => {
    const packetizer = new H265Packetizer();
    expect(packetizer.packetize(Buffer.from([0, 0, 0, 1, 0x46, 0x01, 0x50]))).toEqual([]);
    const slice = Buffer.from([0x02, 0x01, 0xd0, 0x12]);
    expect(packetizer.packetize(Buffer.from([0, 0, 0, 1, 0x46, 0x01, 0x50, 0, 0, 0, 1, ...slice]))).toEqual([slice]);
    expect(packetizer.packetize(Buffer.from([0, 0, 1, 0x02, 0, 0, 1, ...slice]))).toEqual([slice]);
    for (const type of [48, 49, 50, 63]) {
      const odd = Buffer.from([...header(type), 1, 2]);
      expect(packetizer.packetize(annexB(odd, slice))).toEqual([slice]);
    }
    expect(packetizer.packetize(Buffer.alloc(0))).toEqual([]);
  });

  for (const seed of [11, 12, 13, 14]) {
    it(`keeps every payload within the limit for random access units (seed ${seed})`, () => {
      const rng = new Rng(seed);
      for (const max of [4, 5, 8, 64, 500, 1200, 1400]) {
        const packetizer = new H265Packetizer(max);
        for (let i = 0; i < 60; i++) {
          const nals = randomAccessUnit(rng, rng.chance(0.3), max, false);
          const payloads = packetizer.packetize(toAnnexB(rng, nals));
          for (const payload of payloads) checkPayload(payload, max);
        }
      }
    });
  }
});

describe('H265Depacketizer', () => {
  for (const seed of [101, 102, 103]) {
    for (const max of [1200, 100, 9]) {
      it(`round-trips random access units (seed ${seed}, max ${max}) across a sequence wrap`, () => {
        const rng = new Rng(seed);
        const packetizer = new H265Packetizer(max);
        const depacketizer = new H265Depacketizer();
        const sender = new Sender(65_536 - 40);
        const count = max === 1200 ? 120 : 40;
        let packetCount = 0;
        let sawAp = false;
        let sawFu = false;
        for (let i = 0; i < count; i++) {
          const key = i === 0 || rng.chance(0.15);
          const nals = randomAccessUnit(rng, key, max, max === 1200);
          const payloads = packetizer.packetize(toAnnexB(rng, nals));
          for (const payload of payloads) {
            checkPayload(payload, max);
            sawAp ||= h265NalType(payload) === AP;
            sawFu ||= h265NalType(payload) === FU;
          }
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
        expect(sawFu).toBe(true);
        if (max >= 100) expect(sawAp).toBe(true);
      });
    }
  }

  it('reassembles a 200 KB IDR across the 65535 -> 0 wrap', () => {
    const rng = new Rng(8);
    const nals = [
      makeNal(rng, NAL.vps, 24),
      makeNal(rng, NAL.sps, 40),
      makeNal(rng, NAL.pps, 7),
      makeNal(rng, NAL.idrWRadl, 200 * 1024, { firstSlice: true }),
    ];
    const payloads = new H265Packetizer().packetize(annexB(...nals));
    for (const payload of payloads) checkPayload(payload, 1200);
    const packets = new Sender(65_480).frame(payloads);
    expect(packets.some((p) => p.sequenceNumber === 65_535)).toBe(true);
    expect(packets.some((p) => p.sequenceNumber === 0)).toBe(true);
    const frames = pushAll(new H265Depacketizer(), packets);
    expect(frames).toHaveLength(1);
    expectBytes(frames[0]!.data, annexB(...nals));
    expect(frames[0]!.keyframe).toBe(true);
  });

  /** key, P, P, ... built from small access units so each frame spans a few packets. */
  function stream(rng: Rng, pattern: string, max = 300): { nals: Buffer[][]; payloads: Buffer[][] } {
    const packetizer = new H265Packetizer(max);
    const nals = [...pattern].map((c) => {
      const key = c === 'K';
      const au: Buffer[] = key ? [makeNal(rng, NAL.vps, 24), makeNal(rng, NAL.sps, 40), makeNal(rng, NAL.pps, 7)] : [];
      const type = key ? NAL.idrNLp : NAL.trailR;
      au.push(makeNal(rng, type, rng.int(700, 1500), { firstSlice: true }));
      au.push(makeNal(rng, type, rng.int(200, 280)));
      return au;
    });
    return { nals, payloads: nals.map((au) => packetizer.packetize(annexB(...au))) };
  }

  it('drops a frame that lost a packet, withholds until the next keyframe, then recovers', () => {
    const rng = new Rng(20);
    const { nals, payloads } = stream(rng, 'KPPPPKP');
    const sender = new Sender(65_530);
    const depacketizer = new H265Depacketizer();
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
    expectBytes(delivered[5]!.data, annexB(...nals[5]!));
    expectBytes(delivered[6]!.data, annexB(...nals[6]!));
  });

  it('sets needsKeyframe as soon as the gap is seen', () => {
    const rng = new Rng(21);
    const { payloads } = stream(rng, 'KP');
    const sender = new Sender();
    const depacketizer = new H265Depacketizer();
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
    const depacketizer = new H265Depacketizer();
    expect(pushAll(depacketizer, sender.frame(payloads[0]!))).toHaveLength(1);
    const lossy = sender.frame(payloads[1]!);
    expect(pushAll(depacketizer, lossy.slice(0, -1))).toEqual([]);
    // The keyframe's first packet is an AP starting with a VPS: evidently a frame start.
    expect(h265NalType(payloads[2]![0]!)).toBe(AP);
    const key = pushAll(depacketizer, sender.frame(payloads[2]!));
    expect(key).toHaveLength(1);
    expectBytes(key[0]!.data, annexB(...nals[2]!));
    expect(depacketizer.needsKeyframe).toBe(false);
    expect(pushAll(depacketizer, sender.frame(payloads[3]!))).toHaveLength(1);
  });

  it('drops a frame whose first packet was lost even though the rest look complete', () => {
    const rng = new Rng(23);
    const sender = new Sender();
    const depacketizer = new H265Depacketizer();
    const packetizer = new H265Packetizer();
    const key = [
      makeNal(rng, NAL.vps, 24),
      makeNal(rng, NAL.sps, 40),
      makeNal(rng, NAL.pps, 7),
      makeNal(rng, NAL.idrNLp, 900, { firstSlice: true }),
    ];
    expect(pushAll(depacketizer, sender.frame(packetizer.packetize(annexB(...key))))).toHaveLength(1);
    // An IDR picture in two single-NAL packets; the first (first_slice_segment_in_pic_flag = 1) is lost.
    const idrAgain = [makeNal(rng, NAL.idrNLp, 1000, { firstSlice: true }), makeNal(rng, NAL.idrNLp, 1000)];
    const packets = sender.frame(packetizer.packetize(annexB(...idrAgain)));
    expect(packets).toHaveLength(2);
    expect(depacketizer.push(packets[1]!)).toBeUndefined();
    expect(depacketizer.needsKeyframe).toBe(true);
  });

  it('after a gap, keeps a frame only when its first packet evidently begins an access unit', () => {
    const rng = new Rng(32);
    const tail = makeNal(rng, NAL.idrWRadl, 60); // a later slice segment of an IRAP picture
    const first = makeNal(rng, NAL.idrWRadl, 40, { firstSlice: true });
    const fus = new H265Packetizer(12).packetize(annexB(first));
    expect(fus.length).toBeGreaterThan(2);
    const cases: [string, Buffer[], boolean][] = [
      ['first slice segment', [first], true],
      ['later slice segment', [makeNal(rng, NAL.idrWRadl, 40)], false],
      ['first slice segment of layer 1', [makeNal(rng, NAL.idrWRadl, 40, { firstSlice: true, layerId: 1 })], false],
      ['AUD', [Buffer.from([...header(NAL.aud), 0x50])], true],
      ['prefix SEI', [makeNal(rng, NAL.prefixSei, 20)], true],
      ['suffix SEI', [makeNal(rng, NAL.suffixSei, 20)], false],
      ['AP starting with a VPS', new H265Packetizer().packetize(annexB(makeNal(rng, NAL.vps, 24), makeNal(rng, NAL.sps, 40))), true],
      [
        'AP starting with a later slice',
        new H265Packetizer().packetize(annexB(makeNal(rng, NAL.trailR, 20), makeNal(rng, NAL.trailR, 20))),
        false,
      ],
      ['FU start of a first slice segment', fus, true],
      ['FU continuation', fus.slice(1), false],
    ];
    for (const [name, payloads, begins] of cases) {
      const d = new H265Depacketizer({ requireInitialKeyframe: false });
      const sender = new Sender(100, 0);
      expect(pushAll(d, sender.frame([Buffer.from([0x02, 0x01, 0x80])]))).toHaveLength(1);
      sender.seq += 1; // one packet lost between the frames
      const frames = pushAll(d, sender.frame([...payloads, tail]));
      expect({ name, delivered: frames.length }).toEqual({ name, delivered: begins ? 1 : 0 });
      expect({ name, needsKeyframe: d.needsKeyframe }).toEqual({ name, needsKeyframe: !begins });
    }
  });

  it('drops a frame whose FU lacks its end or its start, without any sequence gap', () => {
    // An IDR_N_LP (type 20) NAL unit 28 01 | 81 02 03 04 05 06 in three FUs.
    const fuStart = Buffer.from([0x62, 0x01, 0x80 | 20, 0x81, 2, 3]);
    const fuMiddle = Buffer.from([0x62, 0x01, 20, 4, 5]);
    const fuEnd = Buffer.from([0x62, 0x01, 0x40 | 20, 6]);
    const single = Buffer.from([0x28, 0x01, 0x88, 7]);

    /** A depacketizer that has already delivered one good keyframe, so sequence tracking is primed. */
    const primed = (sender: Sender): H265Depacketizer => {
      const d = new H265Depacketizer();
      expect(pushAll(d, sender.frame([single]))).toHaveLength(1);
      expect(d.needsKeyframe).toBe(false);
      return d;
    };

    for (const broken of [
      [fuStart, single], // the FU never ended before another NAL unit
      [fuStart, single, fuEnd], // ...even if an end turns up after it
      [fuMiddle, fuEnd], // the frame starts with an FU continuation
      [single, fuMiddle, fuEnd], // an FU continuation without a start mid-frame
      [fuStart, fuMiddle], // the marker arrives while the FU is still open
      [fuStart, fuStart, fuEnd], // two starts in a row
      [fuStart, Buffer.from([0x62, 0x01, 0x40 | 19, 6])], // the end names another NAL type
      [single, Buffer.from([0x62, 0x01])], // an FU without its FU header
      [single, Buffer.from([0x02])], // a payload shorter than a payload header
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
    expect([...frames[0]!.data]).toEqual([0, 0, 0, 1, 0x28, 0x01, 0x81, 2, 3, 4, 5, 6]);
    expect(frames[0]!.keyframe).toBe(true);

    // F, LayerId and TID of the rebuilt header come from the FU payload header.
    // (LayerId 35 here: not a base-layer frame start, so sent right after a keyframe, without a gap.)
    const fieldsSender = new Sender();
    const withFields = pushAll(primed(fieldsSender), [
      ...fieldsSender.frame([
        Buffer.from([0x80 | (49 << 1) | 1, (3 << 3) | 5, 0x80 | 1, 0x81]),
        Buffer.from([0x80 | (49 << 1) | 1, (3 << 3) | 5, 0x40 | 1, 9]),
      ]),
    ]);
    expect([...withFields[0]!.data]).toEqual([0, 0, 0, 1, 0x80 | (1 << 1) | 1, (3 << 3) | 5, 0x81, 9]);
  });

  it('ignores duplicated packets and late packets with an older sequence number', () => {
    const rng = new Rng(24);
    const { nals, payloads } = stream(rng, 'KPPK');
    const sender = new Sender(65_533);
    const depacketizer = new H265Depacketizer();
    const sent: RtpPacketFields[] = [];
    const frames: DepacketizedFrame[] = [];
    for (const au of payloads) {
      for (const packet of sender.frame(au)) {
        sent.push(packet);
        for (const p of [packet, packet]) {
          const frame = depacketizer.push(p);
          if (frame) frames.push(frame);
        }
        if (sent.length > 3) expect(depacketizer.push(sent[sent.length - 3]!)).toBeUndefined();
      }
    }
    expect(frames).toHaveLength(nals.length);
    frames.forEach((f, i) => expectBytes(f.data, annexB(...nals[i]!)));
    expect(depacketizer.needsKeyframe).toBe(false);
  });

  it('emits a frame on a timestamp change when the sender sets no marker bits', () => {
    const rng = new Rng(25);
    const { nals, payloads } = stream(rng, 'KPP');
    const sender = new Sender();
    const depacketizer = new H265Depacketizer();
    const frames = payloads.map((au) => pushAll(depacketizer, sender.frame(au, false)));
    expect(frames.map((f) => f.length)).toEqual([0, 1, 1]);
    expectBytes(frames[1]![0]!.data, annexB(...nals[0]!));
    expectBytes(frames[2]![0]!.data, annexB(...nals[1]!));
  });

  it('withholds frames until the first keyframe unless told not to', () => {
    const rng = new Rng(26);
    const { payloads } = stream(rng, 'PPKP');
    let sender = new Sender();
    const strict = new H265Depacketizer();
    const strictFlags: boolean[] = [];
    const delivered = payloads.map((au) => {
      const n = pushAll(strict, sender.frame(au)).length;
      strictFlags.push(strict.needsKeyframe);
      return n;
    });
    expect(delivered).toEqual([0, 0, 1, 1]);
    expect(strictFlags).toEqual([true, true, false, false]);

    sender = new Sender();
    const lenient = new H265Depacketizer({ requireInitialKeyframe: false });
    expect(payloads.map((au) => pushAll(lenient, sender.frame(au)).length)).toEqual([1, 1, 1, 1]);
    expect(lenient.needsKeyframe).toBe(false);
  });

  it('counts every IRAP type as a keyframe, and ends a keyframe wait on a VPS or SPS without one', () => {
    const rng = new Rng(27);
    const packetizer = new H265Packetizer();
    for (const type of IRAP_TYPES) {
      const d = new H265Depacketizer();
      const frames = pushAll(d, new Sender().frame(packetizer.packetize(annexB(makeNal(rng, type, 60, { firstSlice: true })))));
      expect(frames.map((f) => f.keyframe)).toEqual([true]);
    }
    for (const leading of [NAL.vps, NAL.sps]) {
      const sender = new Sender();
      const d = new H265Depacketizer();
      const p = [makeNal(rng, NAL.trailR, 50, { firstSlice: true })];
      expect(pushAll(d, sender.frame(packetizer.packetize(annexB(...p))))).toEqual([]);
      expect(d.needsKeyframe).toBe(true);
      const recovery = [makeNal(rng, leading, 30), makeNal(rng, NAL.trailR, 80, { firstSlice: true })];
      const frames = pushAll(d, sender.frame(packetizer.packetize(annexB(...recovery))));
      expect(frames.map((f) => f.keyframe)).toEqual([false]);
      expect(d.needsKeyframe).toBe(false);
    }
    // A PPS alone does not make a frame decodable from scratch.
    const sender = new Sender();
    const d = new H265Depacketizer();
    const ppsOnly = [makeNal(rng, NAL.pps, 7), makeNal(rng, NAL.trailR, 80, { firstSlice: true })];
    expect(pushAll(d, sender.frame(packetizer.packetize(annexB(...ppsOnly))))).toEqual([]);
    expect(d.needsKeyframe).toBe(true);
  });

  it('treats PACI as loss and ignores the unspecified payload types 51..63', () => {
    const idr = Buffer.from([0x28, 0x01, 0x88, 1]);
    const d = new H265Depacketizer({ requireInitialKeyframe: false });
    expect(pushAll(d, new Sender().frame([idr, Buffer.from([...header(50), 0, 0, 1, 2])]))).toEqual([]);
    expect(d.needsKeyframe).toBe(true);
    for (const type of [51, 55, 63]) {
      const d2 = new H265Depacketizer();
      const frames = pushAll(d2, new Sender().frame([idr, Buffer.from([...header(type), 9, 9])]));
      expect(frames.map((f) => f.data)).toEqual([annexB(idr)]);
      expect(d2.needsKeyframe).toBe(false);
    }
  });

  it('treats malformed APs as loss', () => {
    const idr = Buffer.from([0x28, 0x01, 0x88, 1]);
    for (const bad of [
      Buffer.from([0x60, 0x01]), // no NAL units
      Buffer.from([0x60, 0x01, 0, 5, 0x40, 0x01, 1]), // size beyond the payload
      Buffer.from([0x60, 0x01, 0, 3, 0x40, 0x01, 1, 0]), // dangling size byte
      Buffer.from([0x60, 0x01, 0, 0, 0, 3, 0x40, 0x01, 1]), // zero size
      Buffer.from([0x60, 0x01, 0, 1, 0x40, 0, 3, 0x40, 0x01, 1]), // a NAL unit shorter than its header
    ]) {
      const d = new H265Depacketizer({ requireInitialKeyframe: false });
      expect(pushAll(d, new Sender().frame([idr, bad]))).toEqual([]);
      expect(d.needsKeyframe).toBe(true);
    }
  });

  it('skips padding-only (empty) packets without seeing a gap', () => {
    const rng = new Rng(28);
    const { nals, payloads } = stream(rng, 'KP');
    const sender = new Sender(65_534);
    const depacketizer = new H265Depacketizer();
    const frames = pushAll(depacketizer, [
      ...sender.frame(payloads[0]!),
      ...sender.frame([Buffer.alloc(0), Buffer.alloc(0)], false),
      ...sender.frame(payloads[1]!),
    ]);
    expect(frames).toHaveLength(2);
    expectBytes(frames[0]!.data, annexB(...nals[0]!));
    expectBytes(frames[1]!.data, annexB(...nals[1]!));
    expect(depacketizer.needsKeyframe).toBe(false);
  });

  it('drops a frame that grows past maxFrameBytes', () => {
    const rng = new Rng(30);
    const big = [
      makeNal(rng, NAL.vps, 24),
      makeNal(rng, NAL.sps, 40),
      makeNal(rng, NAL.pps, 7),
      makeNal(rng, NAL.idrNLp, 5000, { firstSlice: true }),
    ];
    const d = new H265Depacketizer({ maxFrameBytes: 4096 });
    expect(pushAll(d, new Sender().frame(new H265Packetizer().packetize(annexB(...big))))).toEqual([]);
    expect(d.needsKeyframe).toBe(true);
  });

  it('reassembles a hand-built AP and keeps NAL order', () => {
    // Parameter sets as x265 starts them, then an IDR_N_LP slice.
    const vps = Buffer.from([0x40, 0x01, 0x0c, 0x01]);
    const sps = Buffer.from([0x42, 0x01, 0x01, 0x01]);
    const pps = Buffer.from([0x44, 0x01, 0xc1, 0x73]);
    const idr = Buffer.from([0x28, 0x01, 0xaf, 0x1d]);
    const ap = Buffer.from([0x60, 0x01, 0, 4, ...vps, 0, 4, ...sps, 0, 4, ...pps, 0, 4, ...idr]);
    const frames = pushAll(new H265Depacketizer(), new Sender().frame([ap]));
    expect(frames).toHaveLength(1);
    expect(frames[0]!.data).toEqual(annexB(vps, sps, pps, idr));
    expect(frames[0]!.keyframe).toBe(true);
  });
});
