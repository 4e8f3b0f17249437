/**
 * A `VideoEncoder` on an FFmpeg encoder through node-av: libx264, libx265, libvpx, or FFmpeg's
 * NVENC wrappers. Which one is the backend registry's choice (encoder-backends.ts); how each is
 * opened is ffmpeg-encoder-options.ts, shared with the probe that chose it.
 *
 * The low-level CodecContext API is used throughout because node-av's high-level
 * `Encoder.encode*` resets `frame.pictType`, which is exactly the field that forces a keyframe.
 * Pixels go into the encoder's frame through ffmpeg-frame-planes.ts.
 *
 * ~500 lines: encoding (on this thread or the pool), keyframes, timestamps and the rate changes
 * (in place, or by reopening libvpx/libx265 between two frames) all act on the one encoder
 * context this class owns and swaps; the reopen rules would be the next thing to move out.
 */
import { CodecContext, FFmpegError, Frame, Packet } from 'node-av/lib';
import {
  AV_PICTURE_TYPE_I,
  AV_PICTURE_TYPE_NONE,
  AV_PIX_FMT_RGBA,
  AV_PIX_FMT_YUV420P,
  AVERROR_EAGAIN,
  AVERROR_EOF,
  FF_ENCODER_LIBVPX_VP8,
  FF_ENCODER_LIBX265,
} from 'node-av/constants';
import { openFfmpegEncoder, openFfmpegEncoderSync, type EncoderSettings } from './ffmpeg-encoder-options.ts';
import { throwIfVideoEncodeFault } from '../faults/encoder-faults.ts';
import { copyPackedIntoFrame, WritableFramePlanes } from './ffmpeg-frame-planes.ts';
import { FrameScaler } from './frame-scaler.ts';
import { noteVideoEncoderFreed, noteVideoEncoderOpened } from './open-encoders.ts';
import { assertFrameShape } from './frame-convert.ts';
import type { VideoFrame } from './frames.ts';
import type {
  CheckedEncoderOptions,
  EncodedVideoFrame,
  EncoderBackend,
  StreamVideoEncoder,
  VideoCodec,
  VideoEncoderOptions,
  VideoEncoderStats,
  H264Profile,
} from './video-encoder.ts';

/**
 * FFmpeg encoders whose wrapper never applies a rate change to a running encoder: libvpx (its
 * encode callback only passes a changed qmax on to vpx_codec_enc_config_set, never bit_rate or
 * rc_max_rate) and libx265 (no reconfiguration at all). `setBitrate` reopens them at the new
 * rate; libx264 and NVENC reconfigure in place (x264_encoder_reconfig, NVENC's dynamic bitrate).
 */
const REOPENED_FOR_RATE: ReadonlySet<string> = new Set([FF_ENCODER_LIBVPX_VP8, FF_ENCODER_LIBX265]);

/**
 * A reopened encoder starts with a keyframe: at most 20 % of a second's budget for libvpx (its
 * max-intra-rate), up to half a second's for x265 (its VBV), paid back over the next frames. So a
 * change is applied at once only when it is worth that (at least this fraction of the running
 * rate, either way); a smaller one waits for the next keyframe asked for anyway (a new viewer, a
 * PLI), and at most REOPEN_HOLD_S.
 */
export const REOPEN_MIN_CHANGE = 0.15;
/** How long (seconds of frames) the VBV buffer stays at half its length after a rate decrease (libx264, NVENC). */
const VBV_SETTLE_S = 2;
/**
 * Reopens for rate changes are at least this far apart (seconds of frames; the first counts from
 * the open): network adaptation may lower the rate every 200 ms while capacity falls, and a
 * keyframe each time would add to the congestion. A change that comes sooner waits, and the
 * reopen then takes the latest target; one riding on a requested keyframe never waits.
 */
export const REOPEN_MIN_INTERVAL_S = 1;
/** How long (seconds of frames) a rate change below REOPEN_MIN_CHANGE may wait for a keyframe. */
export const REOPEN_HOLD_S = 5;

/** A VideoEncoder on an FFmpeg encoder (libx264, libx265, libvpx, FFmpeg's NVENC wrappers). */
export class FfmpegVideoEncoder implements StreamVideoEncoder {
  readonly #codec: VideoCodec;
  readonly #backend: EncoderBackend;
  readonly #width: number;
  readonly #height: number;
  readonly #fps: number;
  readonly #h264Profile: H264Profile;
  /** The target `setBitrate` last asked for. */
  #bitrateKbps: number;
  /** The rate the running encoder was opened at (REOPENED_FOR_RATE backends), else #bitrateKbps. */
  #openedKbps: number;
  /** #framesIn when the target first differed from #openedKbps (REOPENED_FOR_RATE backends). */
  #rateChangeSince = 0;
  #reopens = 0;
  /** #framesIn at the last (re)open. */
  #openedAtFrame = 0;
  /** The VBV buffer's length in seconds, as opened (in-place backends keep it across rate changes). */
  readonly #bufferS: number;
  /** #framesIn from which the VBV buffer gets its full length back after a decrease (in-place backends). */
  #fullBufferAtFrame: number | undefined;
  /** Replaced when a rate change reopens the encoder (REOPENED_FOR_RATE). */
  #context: CodecContext;
  /** FFmpeg-owned yuv420p frame the encoder reads; allocated once and refilled every frame. */
  readonly #frame: Frame;
  readonly #packet: Packet;
  /** For input that is RGBA or another size: converted into #frame through a staging frame. */
  readonly #scaler = new FrameScaler();
  /** The planes pixels are copied into (#frame's or the scaler's staging frame's), kept between frames. */
  readonly #planes = new WritableFramePlanes();
  /** pts (frame counter) to source timestamp, so packets keep their frame's capture time. */
  readonly #timestamps = new Map<bigint, number>();
  #nextPts = 0n;
  #keyframeRequested = false;
  /** Serialises encodes: they share #frame and #packet, and FFmpeg contexts are not reentrant. */
  #queue: Promise<unknown> = Promise.resolve();
  #busy = false;
  #closed = false;
  #freed = false;
  #framesIn = 0;
  #packetsOut = 0;
  #keyframesOut = 0;
  #lastEncodeMs = 0;
  /** Smoothed encode time; 0 until the first encode, so the first goes synchronously. */
  #encodeMsAverage = 0;
  readonly #syncBelowMs: number;
  #threadPoolEncodes = 0;

  private constructor(
    options: Required<Omit<VideoEncoderOptions, 'profile' | 'syncBelowMs'>> & { syncBelowMs: number; h264Profile: H264Profile },
    context: CodecContext,
    frame: Frame,
    packet: Packet,
  ) {
    this.#codec = options.codec;
    this.#backend = options.backend;
    this.#width = options.width;
    this.#height = options.height;
    this.#fps = options.fps;
    this.#h264Profile = options.h264Profile;
    this.#bitrateKbps = options.bitrateKbps;
    this.#openedKbps = options.bitrateKbps;
    this.#syncBelowMs = options.syncBelowMs;
    this.#context = context;
    this.#bufferS = context.bitRate > 0n ? context.rcBufferSize / Number(context.bitRate) : 0.5;
    this.#frame = frame;
    this.#packet = packet;
    noteVideoEncoderOpened();
  }

  /** Opens `backend` (an FFmpeg encoder) for settings `VideoEncoder.create` has checked. */
  static async open(options: CheckedEncoderOptions): Promise<FfmpegVideoEncoder> {
    const { codec, width, height, fps, bitrateKbps, backend, h264Profile } = options;
    const context = await openFfmpegEncoder(backend, { width, height, fps, bitrateKbps, h264Profile });
    try {
      const frame = new Frame();
      frame.alloc();
      frame.format = AV_PIX_FMT_YUV420P;
      frame.width = width;
      frame.height = height;
      FFmpegError.throwIfError(frame.allocBuffer(), 'allocate encoder frame');
      const packet = new Packet();
      packet.alloc();
      return new FfmpegVideoEncoder(
        { codec, width, height, fps, bitrateKbps, backend, h264Profile, syncBelowMs: options.syncBelowMs },
        context,
        frame,
        packet,
      );
    } catch (error) {
      context.freeContext();
      throw error;
    }
  }

  get codec(): VideoCodec {
    return this.#codec;
  }

  get width(): number {
    return this.#width;
  }

  get height(): number {
    return this.#height;
  }

  get bitrateKbps(): number {
    return this.#bitrateKbps;
  }

  /**
   * Every FFmpeg backend follows `setBitrate`: libx264 and NVENC in place, libvpx and libx265 by
   * reopening (see REOPENED_FOR_RATE).
   */
  get adjustsBitrateLive(): boolean {
    return true;
  }

  /** Times a rate change reopened the encoder (libvpx, libx265), each costing a keyframe. */
  get reopens(): number {
    return this.#reopens;
  }

  /**
   * Changes the target bitrate (network adaptation). libx264 and NVENC: from the next frame on —
   * FFmpeg's wrappers read the context's rates per frame and reconfigure, and the VBV buffer keeps
   * its length in time. libvpx and libx265, whose wrappers never do: the next frame reopens the
   * encoder at the new rate (that frame is then a keyframe) when the change is at least
   * REOPEN_MIN_CHANGE of the running rate and the last reopen is REOPEN_MIN_INTERVAL_S back; a
   * smaller one waits for the next requested keyframe, at most REOPEN_HOLD_S. `bitrateKbps` is
   * the target asked for.
   */
  setBitrate(kbps: number): void {
    if (!(kbps > 0)) throw new RangeError(`invalid bitrate ${kbps} kbps`);
    if (this.#freed || Math.round(kbps) === Math.round(this.#bitrateKbps)) return;
    if (REOPENED_FOR_RATE.has(this.#backend.name)) {
      if (Math.round(this.#bitrateKbps) === Math.round(this.#openedKbps)) this.#rateChangeSince = this.#framesIn;
      this.#bitrateKbps = kbps;
      return;
    }
    const context = this.#context;
    const bitsPerSecond = BigInt(Math.round(kbps * 1000));
    context.bitRate = bitsPerSecond;
    context.rcMaxRate = bitsPerSecond;
    // The VBV buffer keeps its length in time. After a decrease, though, it still holds credit
    // earned at the old rate, and the ABR's history (decaying over ~4 s) still aims high: with
    // the full buffer the first 2 s at the new rate ran 14–16 % over it. Half the buffer for
    // 2 s bounds that to a quarter second of the new rate (≤ +12.5 % over a 2 s window).
    const fullBuffer = Math.round(kbps * 1000 * this.#bufferS);
    if (kbps < this.#bitrateKbps) {
      context.rcBufferSize = Math.round(fullBuffer / 2);
      this.#fullBufferAtFrame = this.#framesIn + Math.round(VBV_SETTLE_S * this.#fps);
    } else {
      context.rcBufferSize = fullBuffer;
      this.#fullBufferAtFrame = undefined;
    }
    this.#bitrateKbps = kbps;
    this.#openedKbps = kbps;
  }

  /** Gives the VBV buffer its full length back once VBV_SETTLE_S have passed since a decrease. */
  #restoreBufferIfDue(): void {
    if (this.#fullBufferAtFrame === undefined || this.#framesIn < this.#fullBufferAtFrame) return;
    this.#fullBufferAtFrame = undefined;
    this.#context.rcBufferSize = Math.round(this.#bitrateKbps * 1000 * this.#bufferS);
  }

  /** Whether the next frame should reopen the encoder at the target (REOPENED_FOR_RATE backends). */
  #reopenDue(): boolean {
    if (Math.round(this.#bitrateKbps) === Math.round(this.#openedKbps)) return false;
    // A keyframe is coming anyway (a new viewer, a PLI): the reopen costs nothing more.
    if (this.#keyframeRequested) return true;
    if (this.#framesIn - this.#openedAtFrame < Math.round(REOPEN_MIN_INTERVAL_S * this.#fps)) return false;
    if (Math.abs(this.#bitrateKbps / this.#openedKbps - 1) >= REOPEN_MIN_CHANGE) return true;
    return this.#framesIn - this.#rateChangeSince >= Math.round(REOPEN_HOLD_S * this.#fps);
  }

  #settings(kbps: number): EncoderSettings {
    return { width: this.#width, height: this.#height, fps: this.#fps, bitrateKbps: kbps, h264Profile: this.#h264Profile };
  }

  /**
   * Swaps in `context`, opened at `kbps`, for the running encoder. With lag-in-frames 0 (libvpx)
   * and zerolatency (x265) the old one holds no frames, so nothing is lost; the new one's first
   * frame is a keyframe, and pts keep counting, so packets keep their capture times.
   */
  #swapContext(context: CodecContext, kbps: number): void {
    this.#context.freeContext();
    this.#context = context;
    this.#openedKbps = kbps;
    this.#openedAtFrame = this.#framesIn;
    this.#reopens++;
  }

  /** Reopens the encoder at the target if it is due (`#reopenDue`), on this thread. */
  #reopenSyncIfDue(): void {
    if (!this.#reopenDue()) return;
    const kbps = this.#bitrateKbps;
    try {
      this.#swapContext(openFfmpegEncoderSync(this.#backend, this.#settings(kbps)), kbps);
    } catch {
      // The running encoder stays, at its rate; the change is dropped (adaptation asks again).
      this.#bitrateKbps = this.#openedKbps;
    }
  }

  /** `#reopenSyncIfDue` with the open on node-av's thread pool. */
  async #reopenIfDue(): Promise<void> {
    if (!this.#reopenDue()) return;
    const kbps = this.#bitrateKbps;
    let context: CodecContext;
    try {
      context = await openFfmpegEncoder(this.#backend, this.#settings(kbps));
    } catch {
      this.#bitrateKbps = this.#openedKbps;
      return;
    }
    this.#swapContext(context, kbps);
  }

  /** The implementation encoding this stream (e.g. libx264, or h264_nvenc on a GPU host). */
  get backend(): EncoderBackend {
    return this.#backend;
  }

  get stats(): VideoEncoderStats {
    return {
      framesIn: this.#framesIn,
      packetsOut: this.#packetsOut,
      keyframesOut: this.#keyframesOut,
      lastEncodeMs: this.#lastEncodeMs,
      threadPoolEncodes: this.#threadPoolEncodes,
    };
  }

  /** Makes the next encoded frame a keyframe (an IDR with SPS/PPS for H.264, an IDR with VPS/SPS/PPS for H.265). */
  requestKeyframe(): void {
    this.#keyframeRequested = true;
  }

  /**
   * Encodes one frame and returns its packet (zero-latency encoders give exactly one).
   * The pixels are copied before this resolves, so the caller may reuse `frame.data` at once.
   */
  encode(frame: VideoFrame): Promise<EncodedVideoFrame[]> {
    const run = this.#queue.then(() => this.#encodeNow(frame));
    this.#queue = run.catch(() => undefined);
    return run;
  }

  /** Frees the FFmpeg contexts. Idempotent; later `encode` calls reject. */
  close(): void {
    this.#closed = true;
    // An encode running on a worker thread still uses the contexts; it frees them when it ends.
    if (!this.#busy) this.#free();
  }

  async #encodeNow(frame: VideoFrame): Promise<EncodedVideoFrame[]> {
    if (this.#closed) throw new Error(`${this.#codec} VideoEncoder is closed`);
    throwIfVideoEncodeFault(this.#codec);
    assertFrameShape(frame);
    // A fast encode is cheaper done right here: each async node-av call is a thread-pool round
    // trip plus a promise, which costs more than a 2 ms x264 frame can afford.
    if (this.#encodeMsAverage < this.#syncBelowMs) return this.#encodeSync(frame);
    this.#threadPoolEncodes++;
    this.#busy = true;
    try {
      const started = performance.now();
      const timestampUs = frame.timestampUs ?? Math.round(started * 1000);
      await this.#reopenIfDue();
      this.#restoreBufferIfDue();
      if (this.#closed) throw new Error(`${this.#codec} VideoEncoder is closed`);
      await this.#fill(frame);

      const stamp = this.#stamp(timestampUs);
      const out: EncodedVideoFrame[] = [];
      try {
        let sent = await this.#context.sendFrame(this.#frame);
        if (sent === AVERROR_EAGAIN) {
          // Only if the encoder holds undelivered packets: drain them, then offer the frame once more.
          await this.#drain(out);
          sent = await this.#context.sendFrame(this.#frame);
        }
        FFmpegError.throwIfError(sent, `${this.#codec} sendFrame`);
        await this.#drain(out);
      } catch (error) {
        this.#unstamp(stamp);
        throw error;
      }
      this.#noteEncodeTime(performance.now() - started);
      return out;
    } finally {
      this.#busy = false;
      if (this.#closed) this.#free();
    }
  }

  /** The same encode with node-av's synchronous calls, on this thread. */
  #encodeSync(frame: VideoFrame): EncodedVideoFrame[] {
    const started = performance.now();
    const timestampUs = frame.timestampUs ?? Math.round(started * 1000);
    this.#reopenSyncIfDue();
    this.#restoreBufferIfDue();
    this.#fillSync(frame);
    const stamp = this.#stamp(timestampUs);
    const out: EncodedVideoFrame[] = [];
    try {
      let sent = this.#context.sendFrameSync(this.#frame);
      if (sent === AVERROR_EAGAIN) {
        this.#drainSync(out);
        sent = this.#context.sendFrameSync(this.#frame);
      }
      FFmpegError.throwIfError(sent, `${this.#codec} sendFrame`);
      this.#drainSync(out);
    } catch (error) {
      this.#unstamp(stamp);
      throw error;
    }
    this.#noteEncodeTime(performance.now() - started);
    return out;
  }

  /** Gives the filled frame its pts and keyframe flag. */
  #stamp(timestampUs: number): { pts: bigint; forceKeyframe: boolean } {
    const pts = this.#nextPts++;
    this.#timestamps.set(pts, timestampUs);
    const forceKeyframe = this.#keyframeRequested;
    this.#keyframeRequested = false;
    // Honoured by libx264, libx265 and NVENC (as an IDR, since forced-idr is on) and libvpx
    // (VPX_EFLAG_FORCE_KF).
    this.#frame.pictType = forceKeyframe ? AV_PICTURE_TYPE_I : AV_PICTURE_TYPE_NONE;
    this.#frame.pts = pts;
    this.#framesIn++;
    return { pts, forceKeyframe };
  }

  /** The frame was not taken: a keyframe request carries over to the next. */
  #unstamp({ pts, forceKeyframe }: { pts: bigint; forceKeyframe: boolean }): void {
    if (forceKeyframe) this.#keyframeRequested = true;
    this.#timestamps.delete(pts);
  }

  /**
   * Encode time, smoothed over ~10 frames: it picks the synchronous path while encodes stay
   * short, and the thread pool (which keeps the event loop free) for slow ones — 1440p, libx265,
   * a loaded machine.
   */
  #noteEncodeTime(ms: number): void {
    this.#lastEncodeMs = ms;
    this.#encodeMsAverage = this.#framesIn <= 1 ? ms : this.#encodeMsAverage * 0.9 + ms * 0.1;
  }

  async #drain(out: EncodedVideoFrame[]): Promise<void> {
    for (;;) {
      const received = await this.#context.receivePacket(this.#packet);
      if (received === AVERROR_EAGAIN || received === AVERROR_EOF) return;
      this.#takePacket(received, out);
    }
  }

  #drainSync(out: EncodedVideoFrame[]): void {
    for (;;) {
      const received = this.#context.receivePacketSync(this.#packet);
      if (received === AVERROR_EAGAIN || received === AVERROR_EOF) return;
      this.#takePacket(received, out);
    }
  }

  /** Takes the packet `receivePacket` filled (`received` is its status) into `out`. */
  #takePacket(received: number, out: EncodedVideoFrame[]): void {
    FFmpegError.throwIfError(received, `${this.#codec} receivePacket`);
    // node-av's Packet.data getter returns a copy, so the Buffer outlives unref().
    const data = this.#packet.data;
    const keyframe = this.#packet.isKeyframe;
    const pts = this.#packet.pts;
    this.#packet.unref();
    if (!data) return;
    const timestampUs = this.#timestamps.get(pts) ?? Math.round(performance.now() * 1000);
    for (const key of this.#timestamps.keys()) {
      if (key > pts) break;
      this.#timestamps.delete(key);
    }
    this.#packetsOut++;
    if (keyframe) this.#keyframesOut++;
    out.push({ codec: this.#codec, data, keyframe, timestampUs });
  }

  /** Copies (and if needed converts/scales) the caller's pixels into the FFmpeg-owned frame. */
  async #fill(frame: VideoFrame): Promise<void> {
    const conversion = this.#stage(frame);
    if (conversion) FFmpegError.throwIfError(await conversion.scaler.scaleFrame(this.#frame, conversion.staging), 'swscale');
  }

  /** `#fill` on this thread. */
  #fillSync(frame: VideoFrame): void {
    const conversion = this.#stage(frame);
    if (conversion) FFmpegError.throwIfError(conversion.scaler.scaleFrameSync(this.#frame, conversion.staging), 'swscale');
  }

  /**
   * Copies a frame of the encoder's size and format straight into the encoder frame; any other
   * goes into the scaler's staging frame, and the scale into the encoder frame is left to the caller.
   */
  #stage(frame: VideoFrame): ReturnType<FrameScaler['prepare']> | undefined {
    if (frame.format === 'i420' && frame.width === this.#width && frame.height === this.#height) {
      copyPackedIntoFrame(frame, this.#planes.of(this.#frame));
      return undefined;
    }
    const conversion = this.#scaler.prepare(
      { format: frame.format === 'rgba' ? AV_PIX_FMT_RGBA : AV_PIX_FMT_YUV420P, width: frame.width, height: frame.height },
      { format: AV_PIX_FMT_YUV420P, width: this.#width, height: this.#height },
      'source',
    );
    // The scale writes into the encoder frame: it too must not be shared with the encoder.
    FFmpegError.throwIfError(this.#frame.makeWritable(), 'make encoder frame writable');
    copyPackedIntoFrame(frame, this.#planes.of(conversion.staging));
    return conversion;
  }

  #free(): void {
    if (this.#freed) return;
    this.#freed = true;
    noteVideoEncoderFreed();
    this.#planes.clear();
    this.#scaler.free();
    this.#context.freeContext();
    this.#frame.free();
    this.#packet.free();
    this.#timestamps.clear();
  }
}
