/**
 * FlexFEC in the answer (send/flexfec.ts has why): where a client's offer lists `flexfec-03` in a
 * video section the runtime sends on (Chromium has since M92 — receiving it is on by default;
 * sending it is behind a field trial), the answer names it too, with a FEC SSRC of the runtime's
 * own, paired with the media SSRC in `a=ssrc-group:FEC-FR <media> <fec>` and announced with the
 * media SSRC's cname and msid. libwebrtc creates its FlexFEC receiver only for a signalled pair:
 * repair packets on an SSRC it was not told of are dropped.
 *
 * werift knows nothing of it: the answer's text is rewritten after werift wrote it (as
 * inactive-sections.ts does), and the sender finds the FEC stream here, by transceiver. The FEC
 * SSRC is drawn once per transceiver and kept, so an answer in place names the same one.
 */

import { randomInt } from 'node:crypto';

/** Where a sender's repair packets go: the payload type the client offered, and the runtime's FEC SSRC. */
export interface FlexfecStream {
  readonly payloadType: number;
  readonly ssrc: number;
}

const negotiated = new WeakMap<object, FlexfecStream>();

/** The FlexFEC stream negotiated for a transceiver, if the client offered it. */
export function flexfecOf(transceiver: object): FlexfecStream | undefined {
  return negotiated.get(transceiver);
}

/** One of the runtime's sending video transceivers, as the answer names it. */
export interface SendingSection {
  readonly transceiver: object;
  readonly mid: string | undefined;
}

/**
 * `answerSdp` with FlexFEC added to each of `sending`'s sections whose offered counterpart (same
 * mid) lists `flexfec-03`, which sends H.264 or H.265 (its first payload type: the codec sent;
 * the runtime sends no repair packets with VP8) from a known SSRC; those transceivers are
 * recorded for their senders. Other sections are left as they are.
 */
export function withFlexfec(answerSdp: string, offerSdp: string, sending: readonly SendingSection[]): string {
  const offered = new Map<string, number>();
  for (const section of offerSdp.split(/\r?\n(?=m=)/)) {
    const mid = /^a=mid:(\S+)/m.exec(section)?.[1];
    const payloadType = /^a=rtpmap:(\d+) flexfec-03\/90000/im.exec(section)?.[1];
    if (mid !== undefined && payloadType !== undefined) offered.set(mid, Number(payloadType));
  }
  if (offered.size === 0) return answerSdp;
  const byMid = new Map(sending.filter((s) => s.mid !== undefined).map((s) => [s.mid!, s.transceiver] as const));
  const [head, ...sections] = answerSdp.split(/\r\n(?=m=)/);
  return [
    head,
    ...sections.map((section) => {
      const mid = /^a=mid:(\S+)/m.exec(section)?.[1];
      const transceiver = mid === undefined ? undefined : byMid.get(mid);
      const payloadType = mid === undefined ? undefined : offered.get(mid);
      if (transceiver === undefined || payloadType === undefined || !/^m=video /.test(section)) return section;
      if (!/^a=(sendonly|sendrecv)\r?$/m.test(section)) return section;
      const sent = /^m=video \S+ \S+ (\d+)/.exec(section)?.[1];
      if (sent === undefined || !new RegExp(`^a=rtpmap:${sent} H26[45]/90000`, 'mi').test(section)) return section;
      const mediaSsrc = /^a=ssrc-group:FID (\d+)/m.exec(section)?.[1] ?? /^a=ssrc:(\d+) /m.exec(section)?.[1];
      if (mediaSsrc === undefined) return section;
      const stream = negotiated.get(transceiver) ?? { payloadType, ssrc: unusedSsrc(section) };
      negotiated.set(transceiver, { payloadType, ssrc: stream.ssrc });
      return addFlexfec(section, payloadType, Number(mediaSsrc), stream.ssrc);
    }),
  ].join('\r\n');
}

/** A random SSRC that none of the section's `a=ssrc` lines uses. */
function unusedSsrc(section: string): number {
  const used = new Set([...section.matchAll(/^a=ssrc:(\d+) /gm)].map((m) => Number(m[1])));
  for (;;) {
    const ssrc = randomInt(1, 0xffffffff);
    if (!used.has(ssrc)) return ssrc;
  }
}

function addFlexfec(section: string, payloadType: number, mediaSsrc: number, fecSsrc: number): string {
  const lines = section.split('\r\n');
  lines[0] = `${lines[0]} ${payloadType}`;
  // The codec lines after the section's last codec line; the SSRC lines after its last SSRC line.
  const lastCodec = findLastIndex(lines, (l) => /^a=(rtpmap|fmtp|rtcp-fb):/.test(l));
  lines.splice(lastCodec + 1, 0, `a=rtpmap:${payloadType} flexfec-03/90000`, `a=fmtp:${payloadType} repair-window=10000000`);
  const ssrcLines = lines.filter((l) => l.startsWith(`a=ssrc:${mediaSsrc} `));
  const lastSsrc = findLastIndex(lines, (l) => l.startsWith('a=ssrc:') || l.startsWith('a=ssrc-group:'));
  lines.splice(
    lastSsrc + 1,
    0,
    `a=ssrc-group:FEC-FR ${mediaSsrc} ${fecSsrc}`,
    ...ssrcLines.map((l) => l.replace(`a=ssrc:${mediaSsrc} `, `a=ssrc:${fecSsrc} `)),
  );
  return lines.join('\r\n');
}

function findLastIndex(lines: readonly string[], test: (line: string) => boolean): number {
  for (let i = lines.length - 1; i >= 0; i--) if (test(lines[i]!)) return i;
  return lines.length - 1;
}
