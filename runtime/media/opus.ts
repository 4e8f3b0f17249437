/**
 * Opus encode/decode over node-av (libopus), one 20 ms frame at a time: the unit WebRTC
 * packetises, so one `encode` call yields exactly the payload of one RTP packet.
 */
import { Codec, CodecContext, FFmpegError, Frame, Log, Packet, Rational } from 'node-av/lib';
import {
  AV_CHANNEL_LAYOUT_MONO,
  AV_CHANNEL_LAYOUT_STEREO,
  AV_LOG_INFO,
  AV_LOG_WARNING,
  AV_SAMPLE_FMT_FLT,
  AV_SAMPLE_FMT_FLTP,
  AV_SAMPLE_FMT_S16,
  AV_SAMPLE_FMT_S16P,
  AVERROR_EAGAIN,
  AVERROR_EOF,
  FF_DECODER_LIBOPUS,
  FF_ENCODER_LIBOPUS,
  type AVSampleFormat,
} from 'node-av/constants';
import type { AudioFrame } from './frames.ts';

/** Opus over WebRTC always runs at 48 kHz. */
export const OPUS_SAMPLE_RATE = 48_000;
/** Samples per channel in one 20 ms frame at 48 kHz. */
export const OPUS_FRAME_SAMPLES = 960;

export type OpusChannels = 1 | 2;

/**
 * libopus application modes. `lowdelay` (CELT only) has the least algorithmic delay (2.5 ms
 * lookahead instead of 6.5 ms) and suits generated speech and music alike at WebRTC bitrates.
 */
export type OpusApplication = 'lowdelay' | 'voip' | 'audio';

export interface OpusEncoderOptions {
  readonly sampleRate: typeof OPUS_SAMPLE_RATE;
  readonly channels: OpusChannels;
  /** Defaults to 32 kbps mono / 64 kbps stereo. */
  readonly bitrateKbps?: number;
  readonly application?: OpusApplication;
}

export interface OpusDecoderOptions {
  readonly sampleRate: typeof OPUS_SAMPLE_RATE;
  readonly channels: OpusChannels;
}

export class OpusEncoder {
  readonly #channels: OpusChannels;
  readonly #context: CodecContext;
  /** FFmpeg-owned s16 frame, allocated once; samples are copied in so callers may reuse theirs. */
  readonly #frame: Frame;
  readonly #packet: Packet;
  #nextPts = 0n;
  #queue: Promise<unknown> = Promise.resolve();
  #busy = false;
  #closed = false;
  #freed = false;

  private constructor(channels: OpusChannels, context: CodecContext, frame: Frame, packet: Packet) {
    this.#channels = channels;
    this.#context = context;
    this.#frame = frame;
    this.#packet = packet;
  }

  static async create(options: OpusEncoderOptions): Promise<OpusEncoder> {
    const { sampleRate, channels } = options;
    assertFormat(sampleRate, channels);
    const bitrateKbps = options.bitrateKbps ?? (channels === 2 ? 64 : 32);
    if (!(bitrateKbps >= 6 && bitrateKbps <= 510)) throw new RangeError(`invalid opus bitrate ${bitrateKbps} kbps`);
    quietFfmpegInfoLogs();
    const codec = Codec.findEncoderByName(FF_ENCODER_LIBOPUS);
    if (!codec) throw new Error('this FFmpeg build has no libopus encoder');
    const context = new CodecContext();
    context.allocContext3(codec);
    try {
      context.sampleRate = OPUS_SAMPLE_RATE;
      context.sampleFormat = AV_SAMPLE_FMT_S16;
      context.channelLayout = channels === 2 ? AV_CHANNEL_LAYOUT_STEREO : AV_CHANNEL_LAYOUT_MONO;
      context.timeBase = new Rational(1, OPUS_SAMPLE_RATE);
      context.bitRate = BigInt(Math.round(bitrateKbps * 1000));
      for (const [name, value] of Object.entries({
        application: options.application ?? 'lowdelay',
        frame_duration: 20,
        vbr: 'on',
      })) {
        FFmpegError.throwIfError(context.setOption(name, value), `set opus option ${name}=${value}`);
      }
      FFmpegError.throwIfError(await context.open2(codec, null), 'open libopus encoder');
    } catch (error) {
      context.freeContext();
      throw error;
    }
    const frame = new Frame();
    frame.alloc();
    frame.format = AV_SAMPLE_FMT_S16;
    frame.sampleRate = OPUS_SAMPLE_RATE;
    frame.channelLayout = context.channelLayout;
    frame.nbSamples = OPUS_FRAME_SAMPLES;
    FFmpegError.throwIfError(frame.allocBuffer(), 'allocate opus frame');
    const packet = new Packet();
    packet.alloc();
    return new OpusEncoder(channels, context, frame, packet);
  }

  get channels(): OpusChannels {
    return this.#channels;
  }

  /** Encodes exactly one 20 ms frame: 960 * channels interleaved s16 samples. */
  encode(samples: Int16Array): Promise<Buffer[]> {
    const run = this.#queue.then(() => this.#encodeNow(samples));
    this.#queue = run.catch(() => undefined);
    return run;
  }

  close(): void {
    this.#closed = true;
    if (!this.#busy) this.#free();
  }

  async #encodeNow(samples: Int16Array): Promise<Buffer[]> {
    if (this.#closed) throw new Error('OpusEncoder is closed');
    const expected = OPUS_FRAME_SAMPLES * this.#channels;
    if (samples.length !== expected) {
      throw new RangeError(`opus encode takes one 20 ms frame: ${expected} samples, got ${samples.length}`);
    }
    this.#busy = true;
    try {
      FFmpegError.throwIfError(this.#frame.makeWritable(), 'make opus frame writable');
      const plane = this.#frame.data?.[0];
      if (!plane) throw new Error('opus frame has no buffer');
      plane.set(new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength));
      this.#frame.pts = this.#nextPts;
      this.#nextPts += BigInt(OPUS_FRAME_SAMPLES);
      FFmpegError.throwIfError(await this.#context.sendFrame(this.#frame), 'opus sendFrame');
      const packets: Buffer[] = [];
      for (;;) {
        const received = await this.#context.receivePacket(this.#packet);
        if (received === AVERROR_EAGAIN || received === AVERROR_EOF) break;
        FFmpegError.throwIfError(received, 'opus receivePacket');
        const data = this.#packet.data; // a copy, valid after unref
        this.#packet.unref();
        if (data) packets.push(data);
      }
      return packets;
    } finally {
      this.#busy = false;
      if (this.#closed) this.#free();
    }
  }

  #free(): void {
    if (this.#freed) return;
    this.#freed = true;
    // FFmpeg's libopus wrapper keeps the last frame's timing queued until it is flushed and
    // warns about it on every close otherwise. Flushing costs one tiny encode, off the hot path.
    if (this.#context.sendFrameSync(null) >= 0) {
      while (this.#context.receivePacketSync(this.#packet) >= 0) this.#packet.unref();
    }
    this.#context.freeContext();
    this.#frame.free();
    this.#packet.free();
  }
}

export class OpusDecoder {
  readonly #channels: OpusChannels;
  readonly #context: CodecContext;
  readonly #packet: Packet;
  readonly #decoded: Frame;
  #queue: Promise<unknown> = Promise.resolve();
  #busy = false;
  #closed = false;
  #freed = false;

  private constructor(channels: OpusChannels, context: CodecContext, packet: Packet, decoded: Frame) {
    this.#channels = channels;
    this.#context = context;
    this.#packet = packet;
    this.#decoded = decoded;
  }

  static async create(options: OpusDecoderOptions): Promise<OpusDecoder> {
    const { sampleRate, channels } = options;
    assertFormat(sampleRate, channels);
    quietFfmpegInfoLogs();
    // libopus rather than FFmpeg's native decoder: it outputs interleaved s16 directly.
    const codec = Codec.findDecoderByName(FF_DECODER_LIBOPUS);
    if (!codec) throw new Error('this FFmpeg build has no libopus decoder');
    const context = new CodecContext();
    context.allocContext3(codec);
    try {
      context.sampleRate = OPUS_SAMPLE_RATE;
      context.channelLayout = channels === 2 ? AV_CHANNEL_LAYOUT_STEREO : AV_CHANNEL_LAYOUT_MONO;
      context.timeBase = new Rational(1, OPUS_SAMPLE_RATE);
      FFmpegError.throwIfError(await context.open2(codec, null), 'open libopus decoder');
    } catch (error) {
      context.freeContext();
      throw error;
    }
    const packet = new Packet();
    packet.alloc();
    const decoded = new Frame();
    decoded.alloc();
    return new OpusDecoder(channels, context, packet, decoded);
  }

  get channels(): OpusChannels {
    return this.#channels;
  }

  /** Decodes one Opus packet to interleaved s16 (960 samples per channel for a 20 ms packet). */
  decode(packet: Buffer): Promise<AudioFrame> {
    const run = this.#queue.then(() => this.#decodeNow(packet));
    this.#queue = run.catch(() => undefined);
    return run;
  }

  close(): void {
    this.#closed = true;
    if (!this.#busy) this.#free();
  }

  async #decodeNow(packet: Buffer): Promise<AudioFrame> {
    if (this.#closed) throw new Error('OpusDecoder is closed');
    // An empty packet means "flush" to FFmpeg and would put the decoder into draining mode.
    if (packet.length === 0) throw new Error('opus decode: empty packet');
    this.#busy = true;
    try {
      this.#packet.data = packet;
      let sent: number;
      try {
        sent = await this.#context.sendPacket(this.#packet);
      } finally {
        this.#packet.unref();
      }
      if (sent < 0) throw new Error(`opus decode failed: ${FFmpegError.strerror(sent)} (${sent})`);
      const chunks: Int16Array[] = [];
      for (;;) {
        const received = await this.#context.receiveFrame(this.#decoded);
        if (received === AVERROR_EAGAIN || received === AVERROR_EOF) break;
        if (received < 0) throw new Error(`opus decode failed: ${FFmpegError.strerror(received)} (${received})`);
        try {
          chunks.push(this.#interleavedS16());
        } finally {
          this.#decoded.unref();
        }
      }
      return { sampleRate: OPUS_SAMPLE_RATE, channels: this.#channels, samples: concat(chunks) };
    } finally {
      this.#busy = false;
      if (this.#closed) this.#free();
    }
  }

  /** Copies the decoded frame out of FFmpeg memory as interleaved s16, whatever libopus chose. */
  #interleavedS16(): Int16Array {
    const frame = this.#decoded;
    const planes = frame.data;
    if (!planes) throw new Error('opus decoder returned a frame without data');
    const channels = frame.channels;
    const count = frame.nbSamples;
    const out = new Int16Array(count * channels);
    const format = frame.format as AVSampleFormat;
    if (format === AV_SAMPLE_FMT_S16) {
      new Uint8Array(out.buffer).set(planes[0]!.subarray(0, out.byteLength));
    } else if (format === AV_SAMPLE_FMT_S16P) {
      for (let c = 0; c < channels; c++) {
        const plane = planes[c]!;
        for (let i = 0; i < count; i++) out[i * channels + c] = plane.readInt16LE(i * 2);
      }
    } else if (format === AV_SAMPLE_FMT_FLT || format === AV_SAMPLE_FMT_FLTP) {
      const planar = format === AV_SAMPLE_FMT_FLTP;
      for (let c = 0; c < channels; c++) {
        const plane = planar ? planes[c]! : planes[0]!;
        for (let i = 0; i < count; i++) {
          const offset = planar ? i * 4 : (i * channels + c) * 4;
          const v = Math.round(plane.readFloatLE(offset) * 32767);
          out[i * channels + c] = v > 32767 ? 32767 : v < -32768 ? -32768 : v;
        }
      }
    } else {
      throw new Error(`opus decoder produced unsupported sample format ${format}`);
    }
    return out;
  }

  #free(): void {
    if (this.#freed) return;
    this.#freed = true;
    this.#context.freeContext();
    this.#packet.free();
    this.#decoded.free();
  }
}

function assertFormat(sampleRate: number, channels: number): void {
  if (sampleRate !== OPUS_SAMPLE_RATE) throw new RangeError(`opus runs at 48000 Hz here, got ${sampleRate}`);
  if (channels !== 1 && channels !== 2) throw new RangeError(`opus channels must be 1 or 2, got ${channels}`);
}

function concat(chunks: Int16Array[]): Int16Array {
  if (chunks.length === 1) return chunks[0]!;
  const out = new Int16Array(chunks.reduce((n, chunk) => n + chunk.length, 0));
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.length;
  }
  return out;
}

let ffmpegLogsQuieted = false;

/** FFmpeg logs globally; drop INFO chatter once unless someone already chose a quieter level. */
function quietFfmpegInfoLogs(): void {
  if (ffmpegLogsQuieted) return;
  ffmpegLogsQuieted = true;
  if (Log.getLevel() >= AV_LOG_INFO) Log.setLevel(AV_LOG_WARNING);
}
