/**
 * The frame ring alone (no Python): its header is the layout python/arclight_worker/_ring.py
 * reads, its file is gone from the file system as soon as it exists, slots are bounded, and what
 * is written is read back unchanged. And the control protocol's line parser.
 */

import { readdirSync, readSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { FrameRing, RING_FILE_PREFIX, RING_HEADER_BYTES } from './frame-ring.ts';
import { parseWorkerMessage } from './worker-protocol.ts';

describe('FrameRing', () => {
  it('writes the header Python reads, rounds slots to pages, and leaves no file behind', () => {
    const ring = FrameRing.create({ slotCount: 3, slotBytes: 5_000 });
    try {
      expect(ring.slotBytes).toBe(8_192);
      expect(readdirSync('/dev/shm').filter((name) => name.startsWith(RING_FILE_PREFIX))).toEqual([]);
      const header = Buffer.alloc(32);
      readSync(ring.fd, header, 0, 32, 0);
      expect(header.subarray(0, 8).toString('latin1')).toBe('ARCLRING');
      expect(header.readUInt32LE(8)).toBe(1);
      expect(header.readUInt32LE(12)).toBe(3);
      expect(header.readBigUInt64LE(16)).toBe(8_192n);
      expect(header.readBigUInt64LE(24)).toBe(BigInt(RING_HEADER_BYTES));
    } finally {
      ring.close();
    }
  });

  it('reads back exactly what was written, slot by slot, and refuses what does not fit', () => {
    const ring = FrameRing.create({ slotCount: 2, slotBytes: 4_096 });
    try {
      const a = Uint8Array.from({ length: 4_096 }, (_, i) => i % 251);
      const b = Uint8Array.from({ length: 100 }, (_, i) => 255 - i);
      ring.write(0, a);
      ring.write(1, b);
      const into = new Uint8Array(4_096);
      expect(Buffer.from(ring.read(0, 4_096, into)).equals(Buffer.from(a))).toBe(true);
      expect(Buffer.from(ring.read(1, 100, into)).equals(Buffer.from(b))).toBe(true);
      expect(() => ring.write(2, b)).toThrow(RangeError);
      expect(() => ring.write(0, new Uint8Array(4_097))).toThrow(RangeError);
      expect(() => ring.read(0, 200, new Uint8Array(100))).toThrow(RangeError);
    } finally {
      ring.close();
    }
    expect(ring.closed).toBe(true);
    expect(() => ring.write(0, new Uint8Array(1))).toThrow(/closed/);
  });
});

describe('parseWorkerMessage', () => {
  it('takes protocol messages and refuses anything else', () => {
    expect(parseWorkerMessage('{"type":"heartbeat"}')).toEqual({ type: 'heartbeat' });
    expect(parseWorkerMessage('{"type":"reply","id":3,"ok":true}')).toEqual({ type: 'reply', id: 3, ok: true });
    expect(parseWorkerMessage('{"type":"reply","ok":true}')).toBeUndefined();
    expect(parseWorkerMessage('{"type":"frame_bytes"}')).toBeUndefined();
    expect(parseWorkerMessage('[1,2]')).toBeUndefined();
    expect(parseWorkerMessage('Traceback (most recent call last):')).toBeUndefined();
  });
});
