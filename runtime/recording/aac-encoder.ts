/**
 * AAC-LC for recordings (FFmpeg's native encoder over node-av): takes the runtime's audio — 48 kHz
 * interleaved s16, in frames of any length — and yields AAC access units of 1024 samples each,
 * with their position in samples. Its AudioSpecificConfig (for the MP4 `esds`) is known once
 * open, before any audio arrives, so the init segment never waits for sound.
 */

import { Codec, CodecContext, FFmpegError, Frame, Packet, Rational } from 'node-av/lib';
import {
  AV_CHANNEL_LAYOUT_MONO,
  AV_CHANNEL_LAYOUT_STEREO,
  AV_SAMPLE_FMT_FLTP,
  AVERROR_EAGAIN,
  AVERROR_EOF,
  FF_ENCODER_AAC,
} from 'node-av/constants';

export interface AacPacket {
  readonly data: Buffer;
  /** First sample's index in the stream. */
  readonly position: number;
}

export class AacEncoder {
  readonly sampleRate: number;
  readonly channels: 1 | 2;
  /** The MPEG-4 AudioSpecificConfig (the `esds` decoder-specific info). */
  readonly config: Buffer;
  /** Samples per AAC frame (1024). */
  readonly frameSamples: number;
  readonly #context: CodecContext;
  readonly #frame: Frame;
  readonly #packet: Packet;
  /** Planar float samples waiting for a whole frame, per channel. */
  #pending: Float32Array[];
  #pendingLength = 0;
  #position = 0;
  #queue: Promise<unknown> = Promise.resolve();
  #closed = false;

  private constructor(sampleRate: number, channels: 1 | 2, context: CodecContext, frame: Frame, packet: Packet) {
    this.sampleRate = sampleRate;
    this.channels = channels;
    this.#context = context;
    this.#frame = frame;
    this.#packet = packet;
    this.config = context.extraData ?? Buffer.alloc(0);
    this.frameSamples = context.frameSize || 1024;
    this.#pending = Array.from({ length: channels }, () => new Float32Array(this.frameSamples * 4));
  }

  static async create(options: { sampleRate: number; channels: 1 | 2; bitrateKbps?: number }): Promise<AacEncoder> {
    const codec = Codec.findEncoderByName(FF_ENCODER_AAC);
    if (!codec) throw new Error('this FFmpeg build has no AAC encoder');
    const context = new CodecContext();
    context.allocContext3(codec);
    try {
      context.sampleRate = options.sampleRate;
      context.sampleFormat = AV_SAMPLE_FMT_FLTP;
      context.channelLayout = options.channels === 2 ? AV_CHANNEL_LAYOUT_STEREO : AV_CHANNEL_LAYOUT_MONO;
      context.timeBase = new Rational(1, options.sampleRate);
      context.bitRate = BigInt((options.bitrateKbps ?? (options.channels === 2 ? 128 : 96)) * 1000);
      // The AudioSpecificConfig goes in extradata (the MP4 way), not in every packet (ADTS).
      context.flags = (context.flags | 0x00400000) as typeof context.flags; // AV_CODEC_FLAG_GLOBAL_HEADER
      FFmpegError.throwIfError(await context.open2(codec, null), 'open AAC encoder');
    } catch (error) {
      context.freeContext();
      throw error;
    }
    const frame = new Frame();
    frame.alloc();
    frame.format = AV_SAMPLE_FMT_FLTP;
    frame.sampleRate = options.sampleRate;
    frame.channelLayout = context.channelLayout;
    frame.nbSamples = context.frameSize || 1024;
    FFmpegError.throwIfError(frame.allocBuffer(), 'allocate AAC frame');
    const packet = new Packet();
    packet.alloc();
    return new AacEncoder(options.sampleRate, options.channels, context, frame, packet);
  }

  /** Adds interleaved s16 samples (`channels` per instant); resolves with the AAC frames completed. */
  encode(samples: Int16Array): Promise<AacPacket[]> {
    const run = this.#queue.then(() => this.#encodeNow(samples));
    this.#queue = run.catch(() => undefined);
    return run;
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    void this.#queue.then(() => {
      this.#context.freeContext();
      this.#frame.free();
      this.#packet.free();
    });
  }

  async #encodeNow(samples: Int16Array): Promise<AacPacket[]> {
    if (this.#closed) return [];
    const instants = Math.floor(samples.length / this.channels);
    this.#grow(this.#pendingLength + instants);
    for (let i = 0; i < instants; i++) {
      for (let c = 0; c < this.channels; c++) this.#pending[c]![this.#pendingLength + i] = samples[i * this.channels + c]! / 32768;
    }
    this.#pendingLength += instants;
    const out: AacPacket[] = [];
    while (this.#pendingLength >= this.frameSamples) {
      FFmpegError.throwIfError(this.#frame.makeWritable(), 'make AAC frame writable');
      for (let c = 0; c < this.channels; c++) {
        const plane = this.#frame.data?.[c];
        if (!plane) throw new Error('AAC frame has no buffer');
        const chunk = this.#pending[c]!.subarray(0, this.frameSamples);
        plane.set(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
        this.#pending[c]!.copyWithin(0, this.frameSamples, this.#pendingLength);
      }
      this.#pendingLength -= this.frameSamples;
      this.#frame.pts = BigInt(this.#position);
      this.#position += this.frameSamples;
      FFmpegError.throwIfError(await this.#context.sendFrame(this.#frame), 'AAC sendFrame');
      for (;;) {
        const received = await this.#context.receivePacket(this.#packet);
        if (received === AVERROR_EAGAIN || received === AVERROR_EOF) break;
        FFmpegError.throwIfError(received, 'AAC receivePacket');
        const data = this.#packet.data;
        const position = Number(this.#packet.pts);
        this.#packet.unref();
        if (data) out.push({ data, position });
      }
    }
    return out;
  }

  #grow(length: number): void {
    if (length <= this.#pending[0]!.length) return;
    this.#pending = this.#pending.map((old) => {
      const bigger = new Float32Array(Math.max(length, old.length * 2));
      bigger.set(old.subarray(0, this.#pendingLength));
      return bigger;
    });
  }
}
