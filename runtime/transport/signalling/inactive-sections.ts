/**
 * Answers without `a=ssrc` lines in inactive sections. werift clears an inactive m-line's msid
 * (port 0) but keeps its SSRCs — two of them once RTX is negotiated (media + RTX, the FID group)
 * — and libwebrtc refuses a section with two SSRCs and no msid ("more than one track specified
 * with a=ssrc lines … Unified Plan"). An inactive section sends nothing: its SSRCs say nothing.
 */
export function withoutInactiveSsrcs(sdp: string): string {
  const [head, ...sections] = sdp.split(/\r\n(?=m=)/);
  return [
    head,
    ...sections.map((section) => {
      if (!/\r\na=inactive(\r\n|$)/.test(section)) return section;
      return section
        .split('\r\n')
        .filter((line) => !line.startsWith('a=ssrc:') && !line.startsWith('a=ssrc-group:'))
        .join('\r\n');
    }),
  ].join('\r\n');
}
