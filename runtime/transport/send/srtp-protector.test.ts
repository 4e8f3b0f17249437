import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { RtpHeader, SrtpSession } from 'werift';
import { createSrtpProtector, SRTP_AEAD_AES_128_GCM, SRTP_AES128_CM_HMAC_SHA1_80, type UnprotectedPacket } from './srtp-protector.ts';

/** A werift SRTP session whose sending keys are also handed to our protector. */
function sessions(profile: number) {
  const keys = { localMasterKey: randomBytes(16), localMasterSalt: randomBytes(profile === SRTP_AEAD_AES_128_GCM ? 12 : 14) };
  const werift = new SrtpSession({
    keys: { ...keys, remoteMasterKey: keys.localMasterKey, remoteMasterSalt: keys.localMasterSalt },
    profile: profile as 1,
  });
  const context = werift.localContext;
  const ours = createSrtpProtector({
    profile,
    key: context.srtpSessionKey,
    salt: context.srtpSessionSalt,
    authKey: context.srtpSessionAuthTag,
  });
  // A second werift session keyed the same way, to decrypt what ours produced.
  const receiver = new SrtpSession({
    keys: { ...keys, remoteMasterKey: keys.localMasterKey, remoteMasterSalt: keys.localMasterSalt },
    profile: profile as 1,
  });
  return { werift, ours, receiver };
}

function header(sequenceNumber: number, extension: boolean): RtpHeader {
  const h = new RtpHeader({ sequenceNumber, timestamp: 0xdeadbeef, ssrc: 0x12345678, payloadType: 96, marker: sequenceNumber % 3 === 0 });
  if (extension) {
    h.extension = true;
    h.extensions = [{ id: 3, payload: Buffer.from([0, 0x10, 0x14]) }];
  }
  return h;
}

/** Our packet for `h` + `payload`, in a buffer at an odd offset when `unaligned`. */
function unprotected(h: RtpHeader, payload: Buffer, index: number, tagLength: number, unaligned: boolean): UnprotectedPacket {
  const bytes = h.serialize(h.serializeSize);
  const size = bytes.length + payload.length + tagLength;
  const packet = unaligned ? Buffer.alloc(size + 1).subarray(1) : Buffer.alloc(size);
  bytes.copy(packet);
  return { packet, headerLength: bytes.length, payload, index };
}

describe.each([
  ['AES_CM_128_HMAC_SHA1_80', SRTP_AES128_CM_HMAC_SHA1_80, 10],
  ['AEAD_AES_128_GCM', SRTP_AEAD_AES_128_GCM, 16],
])('SRTP protector, %s', (_name, profile, tagLength) => {
  it('decrypts a packet it protected back into a buffer at any offset (RTX rebuilds a resend from it), past a rollover', () => {
    const { ours } = sessions(profile);
    for (const [sequenceNumber, index] of [
      [7, 7],
      [3, 2 * 0x10000 + 3],
    ] as const) {
      const payload = randomBytes(1001);
      const entry = unprotected(header(sequenceNumber, true), payload, index, tagLength, true);
      ours.protect(0x12345678, [entry]);
      expect(entry.packet.subarray(entry.headerLength, entry.headerLength + payload.length).equals(payload)).toBe(false);
      const into = Buffer.alloc(payload.length + 3);
      ours.decrypt(0x12345678, entry.packet, entry.headerLength, index, into, 3);
      expect(into.subarray(3).equals(payload)).toBe(true);
    }
  });

  it('writes the same bytes as werift, in one batch, across a sequence-number wrap', () => {
    const { werift, ours } = sessions(profile);
    expect(ours.tagLength).toBe(tagLength);
    // Sequence numbers 65533 … 2: the rollover counter becomes 1 at 0.
    const seqs = [65533, 65534, 65535, 0, 1, 2];
    const batch = seqs.map((seq, i) => {
      const payload = randomBytes(1 + i * 237); // lengths not multiples of 16
      const roc = seq < 100 ? 1 : 0;
      return unprotected(
        header(seq, i === 0),
        i === 2 ? Buffer.concat([Buffer.alloc(1), payload]).subarray(1) : payload,
        roc * 65536 + seq,
        tagLength,
        i % 2 === 1,
      );
    });
    ours.protect(0x12345678, batch);
    for (const [i, seq] of seqs.entries()) {
      const expected = werift.encrypt(batch[i]!.payload, header(seq, i === 0));
      expect(batch[i]!.packet.equals(expected), `packet ${i} (seq ${seq})`).toBe(true);
    }
  });

  it('protects only the first `count` packets of a longer (reused) batch, and carries nothing between calls', () => {
    const { werift, ours } = sessions(profile);
    const first = [0, 1, 2].map((i) => unprotected(header(100 + i, i === 0), randomBytes(300 + i), 100 + i, tagLength, false));
    ours.protect(0x12345678, first);
    const sent = first.map((p) => Buffer.from(p.packet));
    // The next frame's two packets in the same array; the third entry is the previous frame's.
    const second = [3, 4].map((i) => unprotected(header(100 + i, false), randomBytes(500), 100 + i, tagLength, true));
    const reused = [...second, first[2]!];
    first[2]!.payload.fill(0); // the stale entry's payload buffer already holds something else
    ours.protect(0x12345678, reused, 2);
    expect(first[2]!.packet.equals(sent[2]!)).toBe(true); // left alone
    for (const [i, p] of second.entries()) {
      expect(p.packet.equals(werift.encrypt(p.payload, header(103 + i, false))), `packet ${i}`).toBe(true);
    }
  });

  it('round-trips through werift decryption', () => {
    const { ours, receiver } = sessions(profile);
    const payload = randomBytes(1180);
    const packet = unprotected(header(4242, true), payload, 4242, tagLength, false);
    ours.protect(0x12345678, [packet]);
    const decrypted = receiver.decrypt(packet.packet);
    expect(decrypted.subarray(packet.headerLength).equals(payload)).toBe(true);
  });
});

describe('createSrtpProtector', () => {
  it('refuses a profile it does not implement', () => {
    expect(() => createSrtpProtector({ profile: 2, key: randomBytes(16), salt: randomBytes(14), authKey: randomBytes(20) })).toThrow(
      /profile 2/,
    );
  });
});
