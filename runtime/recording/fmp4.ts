/**
 * Fragmented MP4 (ISO BMFF, as HLS and MSE play it) for one H.264 track: an init segment (ftyp +
 * moov, the codec configuration from the stream's SPS/PPS) and media segments (moof + mdat, each
 * starting at a keyframe). Written here rather than through FFmpeg's HLS muxer so the recorder
 * decides where a segment ends — at a keyframe it forces when a clip is asked for — and knows each
 * segment's exact start and duration; and because init + any run of segments is itself a playable
 * MP4, which is all a clip download has to join.
 */

/** One encoded access unit (Annex-B, start codes included) and its time. */
export interface H264Sample {
  readonly data: Buffer;
  readonly keyframe: boolean;
  /** Decode (= presentation: no B-frames) time in TIMESCALE units. */
  readonly time: number;
  /** In TIMESCALE units. */
  readonly duration: number;
}

/** Ticks per second of the track's media time (the MPEG 90 kHz clock). */
export const TIMESCALE = 90_000;
const TRACK_ID = 1;

/** Splits an Annex-B access unit into its NAL units (without start codes). */
export function splitAnnexB(data: Buffer): Buffer[] {
  const units: Buffer[] = [];
  let start = -1;
  let i = 0;
  while (i + 2 < data.length) {
    if (data[i] === 0 && data[i + 1] === 0 && (data[i + 2] === 1 || (data[i + 2] === 0 && data[i + 3] === 1))) {
      const codeLength = data[i + 2] === 1 ? 3 : 4;
      if (start >= 0) units.push(trimTrailingZeros(data.subarray(start, i)));
      start = i + codeLength;
      i += codeLength;
    } else {
      i++;
    }
  }
  if (start >= 0 && start < data.length) units.push(data.subarray(start));
  return units.filter((u) => u.length > 0);
}

function trimTrailingZeros(unit: Buffer): Buffer {
  let end = unit.length;
  while (end > 0 && unit[end - 1] === 0) end--;
  return unit.subarray(0, end);
}

const NAL_SPS = 7;
const NAL_PPS = 8;
const NAL_AUD = 9;

/** The SPS and PPS of a keyframe's access unit (an IDR carries them: see video-encoder.ts). */
export function parameterSets(keyframe: Buffer): { sps: Buffer; pps: Buffer } | undefined {
  let sps: Buffer | undefined;
  let pps: Buffer | undefined;
  for (const unit of splitAnnexB(keyframe)) {
    const type = unit[0]! & 0x1f;
    if (type === NAL_SPS) sps ??= unit;
    else if (type === NAL_PPS) pps ??= unit;
  }
  return sps && pps ? { sps, pps } : undefined;
}

/** A sample's NAL units as `avc1` wants them: 4-byte lengths, parameter sets and delimiters left out (they are in avcC). */
function toAvcc(data: Buffer): Buffer {
  const parts: Buffer[] = [];
  for (const unit of splitAnnexB(data)) {
    const type = unit[0]! & 0x1f;
    if (type === NAL_SPS || type === NAL_PPS || type === NAL_AUD) continue;
    const length = Buffer.alloc(4);
    length.writeUInt32BE(unit.length);
    parts.push(length, unit);
  }
  return Buffer.concat(parts);
}

function box(type: string, ...payload: Buffer[]): Buffer {
  const body = Buffer.concat(payload);
  const header = Buffer.alloc(8);
  header.writeUInt32BE(8 + body.length);
  header.write(type, 4, 'ascii');
  return Buffer.concat([header, body]);
}

function fullBox(type: string, version: number, flags: number, ...payload: Buffer[]): Buffer {
  const head = Buffer.alloc(4);
  head.writeUInt32BE(((version & 0xff) << 24) | (flags & 0xffffff));
  return box(type, head, ...payload);
}

function u32(...values: number[]): Buffer {
  const b = Buffer.alloc(4 * values.length);
  values.forEach((v, i) => b.writeUInt32BE(v >>> 0, 4 * i));
  return b;
}

function u16(...values: number[]): Buffer {
  const b = Buffer.alloc(2 * values.length);
  values.forEach((v, i) => b.writeUInt16BE(v & 0xffff, 2 * i));
  return b;
}

/** The unity matrix of mvhd/tkhd. */
const MATRIX = u32(0x00010000, 0, 0, 0, 0x00010000, 0, 0, 0, 0x40000000);

/** ftyp + moov for an H.264 track of `width`×`height`, configured from a keyframe's SPS/PPS. */
export function initSegment(width: number, height: number, sets: { sps: Buffer; pps: Buffer }): Buffer {
  const { sps, pps } = sets;
  const avcC = box(
    'avcC',
    Buffer.from([1, sps[1]!, sps[2]!, sps[3]!, 0xff, 0xe1]),
    u16(sps.length),
    sps,
    Buffer.from([1]),
    u16(pps.length),
    pps,
  );
  const avc1 = box(
    'avc1',
    Buffer.alloc(6), // reserved
    u16(1), // data reference index
    Buffer.alloc(16), // pre-defined, reserved
    u16(width, height),
    u32(0x00480000, 0x00480000, 0), // 72 dpi, reserved
    u16(1), // frame count
    Buffer.alloc(32), // compressor name
    u16(0x0018, 0xffff), // depth, pre-defined
    avcC,
  );
  const stbl = box(
    'stbl',
    fullBox('stsd', 0, 0, u32(1), avc1),
    fullBox('stts', 0, 0, u32(0)),
    fullBox('stsc', 0, 0, u32(0)),
    fullBox('stsz', 0, 0, u32(0, 0)),
    fullBox('stco', 0, 0, u32(0)),
  );
  const minf = box(
    'minf',
    fullBox('vmhd', 0, 1, u16(0, 0, 0, 0)),
    box('dinf', fullBox('dref', 0, 0, u32(1), fullBox('url ', 0, 1))),
    stbl,
  );
  const mdia = box(
    'mdia',
    fullBox('mdhd', 0, 0, u32(0, 0, TIMESCALE, 0), u16(0x55c4, 0)), // language "und"
    fullBox('hdlr', 0, 0, u32(0), Buffer.from('vide'), u32(0, 0, 0), Buffer.from('Arclight video\0')),
    minf,
  );
  const trak = box(
    'trak',
    fullBox('tkhd', 0, 3, u32(0, 0, TRACK_ID, 0, 0), u32(0, 0), u16(0, 0, 0, 0), MATRIX, u32(width << 16, height << 16)),
    mdia,
  );
  const moov = box(
    'moov',
    fullBox('mvhd', 0, 0, u32(0, 0, TIMESCALE, 0), u32(0x00010000), u16(0x0100, 0), u32(0, 0), MATRIX, Buffer.alloc(24), u32(TRACK_ID + 1)),
    trak,
    box('mvex', fullBox('trex', 0, 0, u32(TRACK_ID, 1, 0, 0, 0))),
  );
  const ftyp = box('ftyp', Buffer.from('iso5'), u32(512), Buffer.from('iso5iso6avc1mp41'));
  return Buffer.concat([ftyp, moov]);
}

/** moof + mdat for `samples` (the first a keyframe), fragment number `sequence` (from 1). */
export function mediaSegment(sequence: number, samples: readonly H264Sample[]): Buffer {
  if (samples.length === 0) throw new RangeError('a segment needs at least one sample');
  const payloads = samples.map((s) => toAvcc(s.data));
  // trun flags: data offset, and per sample: duration, size, flags.
  const trunFlags = 0x000001 | 0x000100 | 0x000200 | 0x000400;
  const entries = Buffer.concat(
    samples.map((s, i) =>
      // sample_depends_on 2 (no other) for a keyframe; else 1 (depends) and non-sync.
      u32(s.duration, payloads[i]!.length, s.keyframe ? 0x02000000 : 0x01010000),
    ),
  );
  const build = (dataOffset: number) =>
    box(
      'moof',
      fullBox('mfhd', 0, 0, u32(sequence)),
      box(
        'traf',
        fullBox('tfhd', 0, 0x020000, u32(TRACK_ID)), // default-base-is-moof
        fullBox('tfdt', 1, 0, u32(Math.floor(samples[0]!.time / 2 ** 32), samples[0]!.time % 2 ** 32)),
        fullBox('trun', 0, trunFlags, u32(samples.length, dataOffset), entries),
      ),
    );
  const moofLength = build(0).length;
  const moof = build(moofLength + 8); // the first sample starts right after mdat's header
  return Buffer.concat([moof, box('mdat', ...payloads)]);
}
