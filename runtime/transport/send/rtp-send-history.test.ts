import { describe, expect, it } from 'vitest';
import { RtpSendHistory } from './rtp-send-history.ts';

function put(history: RtpSendHistory, sequenceNumber: number, length: number, fill: number): void {
  history.allocate(sequenceNumber, length).fill(fill);
}

describe('RtpSendHistory', () => {
  it('keeps each packet by sequence number until its slot is reused', () => {
    const history = new RtpSendHistory(4, 16);
    put(history, 65534, 10, 1);
    put(history, 65535, 12, 2);
    put(history, 0, 3, 3);
    expect(history.get(65534)).toEqual(Buffer.alloc(10, 1));
    expect(history.get(65535)).toEqual(Buffer.alloc(12, 2));
    expect(history.get(0)).toEqual(Buffer.alloc(3, 3));
    expect(history.get(1)).toBeUndefined(); // never sent
    put(history, 2, 5, 4); // 65534 % 4 === 2: replaces it
    expect(history.get(65534)).toBeUndefined();
    expect(history.get(2)).toEqual(Buffer.alloc(5, 4));
  });

  it('gives a packet larger than a slot its own buffer, without touching the neighbours', () => {
    const history = new RtpSendHistory(4, 16);
    put(history, 1, 16, 7);
    put(history, 2, 40, 8);
    expect(history.get(2)).toEqual(Buffer.alloc(40, 8));
    expect(history.get(1)).toEqual(Buffer.alloc(16, 7));
    put(history, 6, 4, 9); // same slot as 2, back to slab memory
    expect(history.get(2)).toBeUndefined();
    expect(history.get(6)).toEqual(Buffer.alloc(4, 9));
  });

  it('forgets everything on clear', () => {
    const history = new RtpSendHistory(4, 16);
    put(history, 9, 8, 1);
    put(history, 10, 40, 2);
    history.clear();
    expect(history.get(9)).toBeUndefined();
    expect(history.get(10)).toBeUndefined();
  });
});

describe('RtpSendHistory send times', () => {
  it('keeps when each packet was sent and last resent, until its slot is reused', () => {
    const history = new RtpSendHistory(4, 16);
    history.allocate(7, 10, 1_000);
    expect(history.sentAt(7)).toBe(1_000);
    expect(history.resentAt(7)).toBeUndefined();
    history.markResent(7, 1_050);
    expect(history.resentAt(7)).toBe(1_050);
    history.markResent(8, 1_060); // never sent: nothing to mark
    expect(history.resentAt(8)).toBeUndefined();
    history.allocate(11, 10, 2_000); // 11 % 4 === 7 % 4: a new packet, never resent
    expect(history.sentAt(7)).toBeUndefined();
    expect(history.resentAt(7)).toBeUndefined();
    expect(history.sentAt(11)).toBe(2_000);
    expect(history.resentAt(11)).toBeUndefined();
  });
});
