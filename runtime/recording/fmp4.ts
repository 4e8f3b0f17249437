/**
 * Fragmented MP4 (ISO BMFF, as HLS and MSE play it) for an H.264 track and an optional AAC track:
 * an init segment (ftyp + moov: the video configuration from the stream's SPS/PPS, the audio's
 * AudioSpecificConfig) and media segments (moof + mdat, each starting at a video keyframe). Written here rather than through FFmpeg's HLS muxer so the recorder
 * decides where a segment ends — at a keyframe it forces when a clip is asked for — and knows each
 * segment's exact start and duration; and because init + any run of segments is itself a playable
 * MP4, which is all a clip download has to join.
 */

/** Ticks per second of the video track's media time (the MPEG 90 kHz clock); audio counts samples. */
export const TIMESCALE = 90_000;

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

/**
 * A sample's NAL units as the `avc3` sample entry wants them: 4-byte lengths, delimiters left out,
 * parameter sets kept in band. `avc3` rather than `avc1` because a recording's keyframes may come
 * from more than one encoder (the live stream's, or the recorder's own when no live stream fits:
 * track-recorder.ts), whose SPS/PPS differ; in band, each keyframe carries its own, so init + any
 * run of segments still decodes (the avcC in the init segment holds the first encoder's).
 */
function toAvcc(data: Buffer): Buffer {
  const parts: Buffer[] = [];
  for (const unit of splitAnnexB(data)) {
    const type = unit[0]! & 0x1f;
    if (type === NAL_AUD) continue;
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

/** What the init segment declares: an H.264 video track and, optionally, an AAC audio track. */
export interface Fmp4Tracks {
  readonly video: { readonly width: number; readonly height: number; readonly sps: Buffer; readonly pps: Buffer };
  readonly audio?: { readonly sampleRate: number; readonly channels: number; readonly config: Buffer };
}

/** Track ids: video 1, audio 2. */
export const VIDEO_TRACK_ID = 1;
export const AUDIO_TRACK_ID = 2;

function sampleTable(entry: Buffer): Buffer {
  return box(
    'stbl',
    fullBox('stsd', 0, 0, u32(1), entry),
    fullBox('stts', 0, 0, u32(0)),
    fullBox('stsc', 0, 0, u32(0)),
    fullBox('stsz', 0, 0, u32(0, 0)),
    fullBox('stco', 0, 0, u32(0)),
  );
}

function track(id: number, timescale: number, handler: 'vide' | 'soun', header: Buffer, entry: Buffer, width = 0, height = 0): Buffer {
  const minf = box('minf', header, box('dinf', fullBox('dref', 0, 0, u32(1), fullBox('url ', 0, 1))), sampleTable(entry));
  const mdia = box(
    'mdia',
    fullBox('mdhd', 0, 0, u32(0, 0, timescale, 0), u16(0x55c4, 0)), // language "und"
    fullBox(
      'hdlr',
      0,
      0,
      u32(0),
      Buffer.from(handler),
      u32(0, 0, 0),
      Buffer.from(handler === 'vide' ? 'Arclight video\0' : 'Arclight audio\0'),
    ),
    minf,
  );
  const volume = handler === 'soun' ? 0x0100 : 0;
  return box(
    'trak',
    fullBox('tkhd', 0, 3, u32(0, 0, id, 0, 0), u32(0, 0), u16(0, 0, volume, 0), MATRIX, u32(width << 16, height << 16)),
    mdia,
  );
}

/** An MPEG-4 descriptor: tag, a 4-byte length, payload. */
function descriptor(tag: number, ...payload: Buffer[]): Buffer {
  const body = Buffer.concat(payload);
  const n = body.length;
  return Buffer.concat([
    Buffer.from([tag, 0x80 | ((n >> 21) & 0x7f), 0x80 | ((n >> 14) & 0x7f), 0x80 | ((n >> 7) & 0x7f), n & 0x7f]),
    body,
  ]);
}

/** ftyp + moov: the tracks' configurations (video from its SPS/PPS, audio from its AudioSpecificConfig). */
export function initSegment(tracks: Fmp4Tracks): Buffer {
  const { width, height, sps, pps } = tracks.video;
  const avcC = box(
    'avcC',
    Buffer.from([1, sps[1]!, sps[2]!, sps[3]!, 0xff, 0xe1]),
    u16(sps.length),
    sps,
    Buffer.from([1]),
    u16(pps.length),
    pps,
  );
  const avc3 = box(
    'avc3',
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
  const traks = [track(VIDEO_TRACK_ID, TIMESCALE, 'vide', fullBox('vmhd', 0, 1, u16(0, 0, 0, 0)), avc3, width, height)];
  const trexes = [fullBox('trex', 0, 0, u32(VIDEO_TRACK_ID, 1, 0, 0, 0))];
  if (tracks.audio) {
    const { sampleRate, channels, config } = tracks.audio;
    const esds = fullBox(
      'esds',
      0,
      0,
      descriptor(
        0x03, // ES_Descriptor
        u16(AUDIO_TRACK_ID),
        Buffer.from([0]),
        descriptor(0x04, Buffer.from([0x40, 0x15, 0, 0, 0]), u32(0, 0), descriptor(0x05, config)), // AAC, audio stream
        descriptor(0x06, Buffer.from([0x02])), // SL config: predefined
      ),
    );
    const mp4a = box(
      'mp4a',
      Buffer.alloc(6),
      u16(1),
      u32(0, 0),
      u16(channels, 16, 0, 0),
      u32(sampleRate * 65536 > 0xffffffff ? 0 : sampleRate * 65536),
      esds,
    );
    traks.push(track(AUDIO_TRACK_ID, sampleRate, 'soun', fullBox('smhd', 0, 0, u16(0, 0)), mp4a));
    trexes.push(fullBox('trex', 0, 0, u32(AUDIO_TRACK_ID, 1, 0, 0, 0)));
  }
  const nextTrack = tracks.audio ? AUDIO_TRACK_ID + 1 : VIDEO_TRACK_ID + 1;
  const moov = box(
    'moov',
    fullBox('mvhd', 0, 0, u32(0, 0, TIMESCALE, 0), u32(0x00010000), u16(0x0100, 0), u32(0, 0), MATRIX, Buffer.alloc(24), u32(nextTrack)),
    ...traks,
    box('mvex', ...trexes),
  );
  const ftyp = box('ftyp', Buffer.from('iso5'), u32(512), Buffer.from('iso5iso6avc1mp41'));
  return Buffer.concat([ftyp, moov]);
}

/** One track's run of samples in a segment; `time` of the first in the track's timescale. */
export interface TrackFragment {
  readonly trackId: number;
  readonly time: number;
  readonly samples: ReadonlyArray<{ readonly data: Buffer; readonly duration: number; readonly keyframe: boolean }>;
}

/**
 * moof + mdat, fragment number `sequence` (from 1): video samples (Annex-B, converted to avc3's
 * length-prefixed form) and audio samples (raw AAC), each track's data contiguous in mdat.
 */
export function mediaSegment(sequence: number, fragments: readonly TrackFragment[]): Buffer {
  const present = fragments.filter((f) => f.samples.length > 0);
  if (present.length === 0) throw new RangeError('a segment needs at least one sample');
  const payloads = present.map((f) => f.samples.map((s) => (f.trackId === VIDEO_TRACK_ID ? toAvcc(s.data) : s.data)));
  // trun flags: data offset, and per sample: duration, size, flags.
  const trunFlags = 0x000001 | 0x000100 | 0x000200 | 0x000400;
  const build = (firstDataOffset: number) => {
    let offset = firstDataOffset;
    const trafs = present.map((f, t) => {
      const entries = Buffer.concat(
        f.samples.map((s, i) =>
          // Video: sample_depends_on 2 (none) for a keyframe, else 1 and non-sync. Audio: every sample is a sync sample.
          u32(s.duration, payloads[t]![i]!.length, f.trackId !== VIDEO_TRACK_ID || s.keyframe ? 0x02000000 : 0x01010000),
        ),
      );
      const traf = box(
        'traf',
        fullBox('tfhd', 0, 0x020000, u32(f.trackId)), // default-base-is-moof
        fullBox('tfdt', 1, 0, u32(Math.floor(f.time / 2 ** 32), f.time % 2 ** 32)),
        fullBox('trun', 0, trunFlags, u32(f.samples.length, offset), entries),
      );
      offset += payloads[t]!.reduce((sum, p) => sum + p.length, 0);
      return traf;
    });
    return box('moof', fullBox('mfhd', 0, 0, u32(sequence)), ...trafs);
  };
  const moofLength = build(0).length;
  const moof = build(moofLength + 8); // the first sample starts right after mdat's header
  return Buffer.concat([moof, box('mdat', ...payloads.flat())]);
}
