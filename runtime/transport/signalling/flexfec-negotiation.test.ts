import { describe, expect, it } from 'vitest';
import { flexfecOf, withFlexfec } from './flexfec-negotiation.ts';

/** The video section of a Chromium 156 offer (recvonly), trimmed to what matters here. */
const OFFER = [
  'v=0',
  'o=- 1 2 IN IP4 127.0.0.1',
  's=-',
  't=0 0',
  'a=group:BUNDLE 0',
  'm=video 9 UDP/TLS/RTP/SAVPF 96 97 102 103 49',
  'a=mid:0',
  'a=recvonly',
  'a=rtpmap:96 VP8/90000',
  'a=rtpmap:97 rtx/90000',
  'a=fmtp:97 apt=96',
  'a=rtpmap:102 H264/90000',
  'a=rtpmap:103 rtx/90000',
  'a=fmtp:103 apt=102',
  'a=rtpmap:49 flexfec-03/90000',
  'a=rtcp-fb:49 transport-cc',
  'a=fmtp:49 repair-window=10000000',
  '',
].join('\r\n');

/** werift's answer to it, sending H.264 with RTX. */
const ANSWER = [
  'v=0',
  'o=- 3 4 IN IP4 127.0.0.1',
  's=-',
  't=0 0',
  'a=group:BUNDLE 0',
  'm=video 9 UDP/TLS/RTP/SAVPF 102 103',
  'a=mid:0',
  'a=sendonly',
  'a=rtpmap:102 H264/90000',
  'a=rtcp-fb:102 nack',
  'a=rtpmap:103 rtx/90000',
  'a=fmtp:103 apt=102',
  'a=ssrc-group:FID 1111 2222',
  'a=ssrc:1111 cname:abc',
  'a=ssrc:1111 msid:arclight main_video',
  'a=ssrc:2222 cname:abc',
  'a=ssrc:2222 msid:arclight main_video',
  '',
].join('\r\n');

describe('withFlexfec', () => {
  it('answers an offered flexfec-03 with the codec and a FEC SSRC paired to the media SSRC (FEC-FR), and keeps that SSRC', () => {
    const transceiver = {};
    const answer = withFlexfec(ANSWER, OFFER, [{ transceiver, mid: '0' }]);
    const fec = flexfecOf(transceiver);
    expect(fec?.payloadType).toBe(49);
    expect(fec!.ssrc).toBeGreaterThan(0);
    const lines = answer.split('\r\n');
    expect(lines).toContain('m=video 9 UDP/TLS/RTP/SAVPF 102 103 49');
    expect(lines).toContain('a=rtpmap:49 flexfec-03/90000');
    expect(lines).toContain('a=fmtp:49 repair-window=10000000');
    expect(lines).toContain(`a=ssrc-group:FEC-FR 1111 ${fec!.ssrc}`);
    expect(lines).toContain(`a=ssrc:${fec!.ssrc} cname:abc`);
    expect(lines).toContain(`a=ssrc:${fec!.ssrc} msid:arclight main_video`);
    // The codec lines stay together (before the SSRC lines); the FID group is untouched.
    expect(lines.indexOf('a=rtpmap:49 flexfec-03/90000')).toBeLessThan(lines.indexOf('a=ssrc-group:FID 1111 2222'));
    expect(answer.endsWith('\r\n')).toBe(true);
    // An answer in place names the same FEC SSRC.
    withFlexfec(ANSWER, OFFER, [{ transceiver, mid: '0' }]);
    expect(flexfecOf(transceiver)).toEqual(fec);
  });

  it('leaves the answer alone where flexfec-03 was not offered, the section does not send, or it sends VP8', () => {
    const transceiver = {};
    const withoutFec = OFFER.replace(/a=rtpmap:49 flexfec-03\/90000\r\n/, '');
    expect(withFlexfec(ANSWER, withoutFec, [{ transceiver, mid: '0' }])).toBe(ANSWER);
    expect(flexfecOf(transceiver)).toBeUndefined();
    const receiving = ANSWER.replace('a=sendonly', 'a=recvonly');
    expect(withFlexfec(receiving, OFFER, [{ transceiver, mid: '0' }])).toBe(receiving);
    expect(withFlexfec(ANSWER, OFFER, [])).toBe(ANSWER);
    const vp8 = ANSWER.replace('UDP/TLS/RTP/SAVPF 102 103', 'UDP/TLS/RTP/SAVPF 96 97').replace(
      'a=rtpmap:102 H264/90000',
      'a=rtpmap:96 VP8/90000',
    );
    expect(withFlexfec(vp8, OFFER, [{ transceiver, mid: '0' }])).toBe(vp8);
    expect(flexfecOf(transceiver)).toBeUndefined();
  });
});
