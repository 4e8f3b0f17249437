import { describe, expect, it } from 'vitest';
import { IcePolicy, withPublicCandidates } from './ice-policy.ts';

/** The candidate part of a werift answer (two host candidates, one of them outside the policy). */
const ANSWER = [
  'v=0',
  'm=video 9 UDP/TLS/RTP/SAVPF 96',
  'c=IN IP4 0.0.0.0',
  'a=candidate:626da4e5384a0ce2d0d93678a 1 udp 2116026367 10.0.0.5 40002 typ host generation 0 ufrag b980',
  'a=candidate:32b1715da3b0ef8ba684454eb 1 udp 2116026367 172.17.0.1 40003 typ host generation 0 ufrag b980',
  'a=end-of-candidates',
  'a=ice-ufrag:b980',
  '',
].join('\r\n');

const candidates = (sdp: string): string[] => sdp.split('\r\n').filter((line) => line.startsWith('a=candidate:'));

describe('IcePolicy', () => {
  it('advertises each host candidate again at the public address, same port, as srflx with its base as raddr/rport', () => {
    const policy = new IcePolicy({ hostAddresses: ['10.0.0.5'], publicAddress: '203.0.113.7' });
    const sdp = policy.advertisedSdp(ANSWER);
    expect(candidates(sdp)).toEqual([
      'a=candidate:626da4e5384a0ce2d0d93678a 1 udp 2116026367 10.0.0.5 40002 typ host generation 0 ufrag b980',
      // werift's host priority is 126 << 24 | 8191 << 8 | 255; the twin keeps the local preference (8191) under srflx's 100.
      `a=candidate:626da4e5384a0ce2d0d93678ap 1 udp ${100 * 2 ** 24 + 8191 * 256 + 255} 203.0.113.7 40002 typ srflx raddr 10.0.0.5 rport 40002 generation 0 ufrag b980`,
    ]);
    // Everything else is untouched.
    expect(sdp.split('\r\n').filter((line) => !line.startsWith('a=candidate:'))).toEqual(
      ANSWER.split('\r\n').filter((line) => !line.startsWith('a=candidate:')),
    );
  });

  it('without hostAddresses every host candidate gets its public twin; none without publicAddress', () => {
    expect(
      candidates(new IcePolicy({ publicAddress: '203.0.113.7' }).advertisedSdp(ANSWER)).filter((l) => l.includes(' typ srflx ')),
    ).toHaveLength(2);
    expect(new IcePolicy({}).advertisedSdp(ANSWER)).toBe(ANSWER);
  });

  it('leaves other families, TCP, non-host candidates and a host already at the public address alone', () => {
    const sdp = [
      'a=candidate:a 1 udp 2116026367 2001:db8::5 40010 typ host generation 0',
      'a=candidate:b 1 tcp 1518280447 10.0.0.5 40011 typ host tcptype passive generation 0',
      'a=candidate:c 1 udp 1677729535 198.51.100.1 40012 typ srflx raddr 10.0.0.5 rport 40012 generation 0',
      'a=candidate:d 1 udp 2116026367 203.0.113.7 40013 typ host generation 0',
    ].join('\r\n');
    expect(withPublicCandidates(sdp, '203.0.113.7')).toBe(sdp);
    expect(candidates(withPublicCandidates(sdp, '2001:db8::7'))).toContain(
      'a=candidate:ap 1 udp 1679818751 2001:db8::7 40010 typ srflx raddr 2001:db8::5 rport 40010 generation 0',
    );
  });

  it('refuses a public address that is not an IP and a port range werift cannot use', () => {
    expect(() => new IcePolicy({ publicAddress: 'gpu-1.example.com' })).toThrow(/publicAddress/);
    expect(() => new IcePolicy({ portRange: [40000, 40000] })).toThrow(/portRange/);
    expect(() => new IcePolicy({ portRange: [0, 10] })).toThrow(/portRange/);
    expect(() => new IcePolicy({ portRange: [40000, 70000] })).toThrow(/portRange/);
    expect(new IcePolicy({ portRange: [40000, 40099] }).portRange).toEqual([40000, 40099]);
  });
});
