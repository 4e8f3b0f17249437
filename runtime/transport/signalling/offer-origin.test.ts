import { describe, expect, it } from 'vitest';
import { offerOrigin, peerIdentity } from './offer-origin.ts';

const offer = (fingerprint: string | undefined, ufrag: string, pwd = 'p'.repeat(24)) =>
  [
    'v=0',
    'o=- 1 2 IN IP4 127.0.0.1',
    's=-',
    't=0 0',
    'm=video 9 UDP/TLS/RTP/SAVPF 96',
    `a=ice-ufrag:${ufrag}`,
    `a=ice-pwd:${pwd}`,
    ...(fingerprint ? [`a=fingerprint:${fingerprint}`] : []),
    'a=mid:0',
    '',
  ].join('\r\n');

const A = 'sha-256 AA:BB:CC';
const B = 'sha-256 DD:EE:FF';

describe('offerOrigin', () => {
  it('same certificate and ICE credentials: the same client peer', () => {
    expect(offerOrigin(offer(A, 'u1'), offer('SHA-256  aa:bb:cc', 'u1'))).toBe('same-peer');
  });

  it('same certificate, new ICE credentials: an ICE restart', () => {
    expect(offerOrigin(offer(A, 'u1'), offer(A, 'u2'))).toBe('ice-restart');
    expect(offerOrigin(offer(A, 'u1'), offer(A, 'u1', 'q'.repeat(24)))).toBe('ice-restart');
  });

  it('another certificate, nothing answered yet, or no fingerprint to tell: a fresh peer', () => {
    expect(offerOrigin(offer(A, 'u1'), offer(B, 'u1'))).toBe('fresh-peer');
    expect(offerOrigin(undefined, offer(A, 'u1'))).toBe('fresh-peer');
    expect(offerOrigin(offer(undefined, 'u1'), offer(undefined, 'u1'))).toBe('fresh-peer');
  });

  it('reads the first ufrag and every fingerprint', () => {
    expect(peerIdentity(`${offer(A, 'u1')}m=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=ice-ufrag:u9\r\na=fingerprint:${B}\r\n`)).toEqual({
      fingerprints: ['sha-256 aa:bb:cc', 'sha-256 dd:ee:ff'],
      iceUfrag: 'u1',
      icePwd: 'p'.repeat(24),
    });
  });
});
