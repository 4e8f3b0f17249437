import { describe, expect, it } from 'vitest';
import { withoutInactiveSsrcs } from './inactive-sections.ts';

describe('withoutInactiveSsrcs', () => {
  it('drops the SSRC lines of inactive sections only', () => {
    const sdp = [
      'v=0',
      'm=video 9 UDP/TLS/RTP/SAVPF 96 97',
      'a=sendonly',
      'a=msid:arclight t1',
      'a=ssrc-group:FID 1 2',
      'a=ssrc:1 cname:x',
      'a=ssrc:2 cname:x',
      'm=video 0 UDP/TLS/RTP/SAVPF 96 97',
      'a=inactive',
      'a=ssrc-group:FID 3 4',
      'a=ssrc:3 cname:x',
      'a=ssrc:4 cname:x',
      'a=mid:1',
      '',
    ].join('\r\n');
    const out = withoutInactiveSsrcs(sdp);
    expect(out).toContain('a=ssrc:1 cname:x\r\na=ssrc:2 cname:x');
    expect(out).not.toMatch(/a=ssrc(-group)?:[^\r]*[34]/);
    expect(out).toContain('a=inactive\r\na=mid:1\r\n');
  });
});
