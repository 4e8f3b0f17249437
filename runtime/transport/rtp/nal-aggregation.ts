/**
 * Turns one access unit's NAL units into RTP payloads ≤ `max` bytes, the same way for H.264
 * (RFC 6184: STAP-A / FU-A) and H.265 (RFC 7798: AP / FU): small consecutive NAL units share an
 * aggregation packet, a NAL unit larger than a packet is fragmented, and a run of parameter sets
 * is kept together (losing one of them alone makes the others useless).
 */

export interface NalPacketization {
  /** Bytes of the aggregation packet's own header (STAP-A: 1, AP: 2). */
  readonly aggregationHeaderBytes: number;
  /** Is this NAL unit a parameter set (SPS/PPS, or VPS/SPS/PPS)? */
  isParameterSet(nal: Buffer): boolean;
  /** Appends the fragmentation packets of one NAL unit larger than `max`. */
  fragment(nal: Buffer, max: number, out: Buffer[]): void;
  /** Builds one aggregation packet from `nals`, `totalBytes` long. */
  aggregate(nals: readonly Buffer[], totalBytes: number): Buffer;
}

/** Each aggregated NAL unit is preceded by a 16-bit size (both RFCs). */
const AGGREGATED_SIZE_BYTES = 2;

export function packetizeNalUnits(nals: readonly Buffer[], max: number, codec: NalPacketization): Buffer[] {
  const header = codec.aggregationHeaderBytes;
  const payloads: Buffer[] = [];
  // NAL units waiting to go out together are nals[groupStart, groupEnd) (always consecutive),
  // and groupBytes the aggregation packet size they would need. No closure or array per frame.
  let groupStart = 0;
  let groupEnd = 0;
  let groupBytes = header;

  for (let i = 0; i < nals.length; i++) {
    const nal = nals[i]!;
    if (nal.length > max) {
      flushGroup(nals, groupStart, groupEnd, groupBytes, codec, payloads);
      groupStart = groupEnd = i + 1;
      groupBytes = header;
      codec.fragment(nal, max, payloads);
      continue;
    }
    // The aggregated size field is 16 bits, so larger NAL units (possible with a huge max) go alone.
    if (nal.length > 0xffff) {
      flushGroup(nals, groupStart, groupEnd, groupBytes, codec, payloads);
      groupStart = groupEnd = i + 1;
      groupBytes = header;
      payloads.push(nal);
      continue;
    }
    const entryBytes = AGGREGATED_SIZE_BYTES + nal.length;
    const waiting = groupEnd > groupStart;
    // A run of parameter sets that would not fit after what is waiting, but fits on its own,
    // starts a fresh packet.
    let flush = false;
    if (waiting && codec.isParameterSet(nal) && !(i > 0 && codec.isParameterSet(nals[i - 1]!))) {
      let runBytes = 0;
      for (let j = i; j < nals.length && codec.isParameterSet(nals[j]!); j++) runBytes += AGGREGATED_SIZE_BYTES + nals[j]!.length;
      if (groupBytes + runBytes > max && header + runBytes <= max) flush = true;
    }
    if (waiting && (flush || groupBytes + entryBytes > max)) {
      flushGroup(nals, groupStart, groupEnd, groupBytes, codec, payloads);
      groupStart = i;
      groupBytes = header;
    }
    groupEnd = i + 1;
    groupBytes += entryBytes;
  }
  flushGroup(nals, groupStart, groupEnd, groupBytes, codec, payloads);
  return payloads;
}

/** The waiting NAL units as one payload: alone as they are, or aggregated. */
function flushGroup(
  nals: readonly Buffer[],
  start: number,
  end: number,
  groupBytes: number,
  codec: NalPacketization,
  payloads: Buffer[],
): void {
  if (end - start === 1) payloads.push(nals[start]!);
  else if (end - start > 1) payloads.push(codec.aggregate(nals.slice(start, end), groupBytes));
}
