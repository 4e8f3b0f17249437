import { describe, expect, it } from 'vitest';
import { candidateEndpoints, parseCandidate, rewriteCandidate, rewriteSdp, type Endpoint } from './sdp-rewrite.ts';
import { rewriteJson } from './signalling-proxy.ts';

const SDP = [
  'v=0',
  'o=- 1 2 IN IP4 127.0.0.1',
  's=-',
  't=0 0',
  'a=group:BUNDLE 0 1',
  'm=video 9 UDP/TLS/RTP/SAVPF 96',
  'c=IN IP4 10.231.0.1',
  'a=rtcp:9 IN IP4 0.0.0.0',
  'a=mid:0',
  'a=candidate:1 1 udp 2130706431 10.231.0.1 40000 typ host generation 0',
  'a=candidate:2 1 udp 1694498815 10.231.0.1 40000 typ srflx raddr 10.231.0.1 rport 40000 generation 0',
  'a=candidate:3 1 tcp 1518280447 10.231.0.1 9 typ host tcptype active',
  'a=candidate:4 1 udp 2130706431 192.168.1.5 40001 typ host',
  'a=candidate:5 1 udp 2130706431 abcd.local 40002 typ host',
  'm=application 9 UDP/DTLS/SCTP webrtc-datachannel',
  'c=IN IP4 10.231.0.1',
  'a=mid:1',
  'a=candidate:1 1 udp 2130706431 10.231.0.1 40000 typ host generation 0',
  '',
].join('\r\n');

const map = new Map<string, Endpoint>([['10.231.0.1:40000', { address: '127.0.0.1', port: 5000 }]]);

describe('SDP candidate rewriting', () => {
  it('lists the UDP endpoints of the candidates', () => {
    expect(candidateEndpoints(SDP)).toEqual([
      { address: '10.231.0.1', port: 40000 },
      { address: '192.168.1.5', port: 40001 },
      { address: 'abcd.local', port: 40002 },
    ]);
    expect(parseCandidate('candidate:2 1 udp 5 1.2.3.4 7 typ srflx raddr 9.9.9.9 rport 1 generation 0')).toMatchObject({
      type: 'srflx',
      extensions: ['generation', '0'],
    });
  });

  it('swaps mapped candidates for the relay (typ host), removes the rest and duplicates, fixes c= and drops a=rtcp', () => {
    const out = rewriteSdp(SDP, map);
    expect(out.split('\r\n').filter((l) => l.startsWith('a=candidate'))).toEqual([
      'a=candidate:1 1 udp 2130706431 127.0.0.1 5000 typ host generation 0',
      'a=candidate:1 1 udp 2130706431 127.0.0.1 5000 typ host generation 0',
    ]);
    expect(out.split('\r\n').filter((l) => l.startsWith('c='))).toEqual(['c=IN IP4 127.0.0.1', 'c=IN IP4 127.0.0.1']);
    expect(out).not.toContain('a=rtcp:');
    expect(out).not.toContain('10.231.0.1 ');
    expect(out.endsWith('\r\n')).toBe(true);
  });

  it('rewrites a trickled candidate string, or says to drop it', () => {
    expect(rewriteCandidate('candidate:1 1 udp 2130706431 10.231.0.1 40000 typ host', map)).toBe(
      'candidate:1 1 udp 2130706431 127.0.0.1 5000 typ host',
    );
    expect(rewriteCandidate('candidate:3 1 tcp 1 10.231.0.1 9 typ host', map)).toBeUndefined();
    expect(rewriteCandidate('candidate:4 1 udp 1 192.168.1.5 40001 typ host', map)).toBeUndefined();
  });

  it('rewriteJson finds SDP and candidates anywhere in a JSON body, and drops removed candidate entries', async () => {
    const body = {
      sdp_offer: 'v=0\r\nm=video 9 x\r\n',
      nested: [
        { candidate: 'candidate:1 1 udp 1 10.231.0.1 40000 typ host', sdp_mid: '0' },
        { candidate: 'candidate:4 1 udp 1 192.168.1.5 40001 typ host', sdp_mid: '0' },
      ],
      other: 'hello',
      n: 3,
    };
    const out = await rewriteJson(
      body,
      async (sdp) => `${sdp}REWRITTEN`,
      async (candidate) => rewriteCandidate(candidate, map),
    );
    expect(out).toEqual({
      sdp_offer: 'v=0\r\nm=video 9 x\r\nREWRITTEN',
      nested: [{ candidate: 'candidate:1 1 udp 1 127.0.0.1 5000 typ host', sdp_mid: '0' }],
      other: 'hello',
      n: 3,
    });
  });
});
