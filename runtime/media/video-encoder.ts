/**
 * What every video encoder is, whichever implementation does the work: the `VideoEncoder`
 * interface, the settings it is opened with and what it gives back. Nothing here encodes; the
 * implementations (ffmpeg-video-encoder.ts, nvenc-video-encoder.ts) and the factory that picks
 * one (video-encoder-factory.ts) import this file, never the other way round, so a reader of the
 * interface, or code that only passes encoders around, loads no FFmpeg and no addon.
 *
 * Tuned for interactive streaming, not for archiving: one frame in gives its packet out in the
 * same call (no lookahead, no B-frames, no lag), keyframes come only when asked for (a new
 * subscriber, a PLI) and every H.264 IDR carries its own SPS/PPS (every H.265 IRAP its
 * VPS/SPS/PPS) so a viewer can join on it.
 */
import type { CudaFrame } from '../native/native-addon.ts';
import type { VideoFrame } from './frames.ts';

/** Video codecs the runtime encodes and decodes (H.265 has no WebRTC path in the browsers we test). */
export type VideoCodec = 'h264' | 'h265' | 'vp8';
/**
 * A codec in `RuntimeOptions.videoCodecs`' preference list: the same names as `VideoCodec`, the
 * one codec type. The name stays for the options' public API.
 */
export type VideoCodecPreference = VideoCodec;

/**
 * H.264 profile. `constrained-baseline`: what every browser's WebRTC stack offers and decodes
 * (SDP profile-level-id 42e0xx). `high`: CABAC and the 8x8 transform (profile_idc 100, SDP 640cxx),
 * smaller at the same quality, for clients that offer it; still no B-frames.
 */
export type H264Profile = 'constrained-baseline' | 'high';

export interface VideoEncoderOptions {
  readonly codec: VideoCodec;
  /** Encoded size; frames of another size are scaled to it. H.264 and H.265 need both even (4:2:0). */
  readonly width: number;
  readonly height: number;
  /** Nominal frame rate: sizes the rate-control budget per frame and the keyframe interval. */
  readonly fps: number;
  /** Target bitrate; defaults to 2500 kbps at 1280x720, scaled by pixel count. */
  readonly bitrateKbps?: number;
  /** H.264 only (a RangeError for other codecs); default `constrained-baseline`. */
  readonly profile?: H264Profile;
  /**
   * The implementation to encode with; default the process-wide choice for `codec`
   * (`EncoderBackendRegistry.select`, encoder-backends.ts). For benchmarks and tests that compare backends.
   */
  readonly backend?: EncoderBackend;
  /**
   * Encodes averaging under this many ms run synchronously on the calling thread; slower ones on
   * node-av's thread pool. Default SYNC_ENCODE_MAX_MS; 0 always uses the thread pool.
   */
  readonly syncBelowMs?: number;
}

export interface EncodedVideoFrame {
  readonly codec: VideoCodec;
  /** H.264/H.265: one Annex-B access unit, start codes included. VP8: one VP8 frame. */
  readonly data: Buffer;
  /** H.264: an IDR (preceded by SPS/PPS). H.265: an IRAP (preceded by VPS/SPS/PPS). VP8: a key frame. */
  readonly keyframe: boolean;
  /** The source frame's `timestampUs`, or when `encode` was called if it had none. */
  readonly timestampUs: number;
}

export interface VideoEncoderStats {
  readonly framesIn: number;
  readonly packetsOut: number;
  readonly keyframesOut: number;
  /** Wall time of the last `encode` call: pixel copy/scale + encode + packet copy. */
  readonly lastEncodeMs: number;
  /** Frames encoded on node-av's thread pool (the rest ran synchronously; see `syncBelowMs`). */
  readonly threadPoolEncodes: number;
}

/**
 * Encodes that take (on average) less than this run synchronously on the calling thread;
 * slower ones go through node-av's thread pool so the event loop stays responsive. 12 ms keeps
 * x264 at 720p–1440p, libvpx at 720p and NVENC synchronous; libx265 and libvpx at 1080p go to
 * the pool. (At 6 ms, 1080p x264 — 5–8 ms here — flipped between the two and its encode p99
 * rose to 36 ms; see docs/performance.md.)
 */
export const SYNC_ENCODE_MAX_MS = 12;

/** Settings `VideoEncoder.create` has validated and completed, for a backend to open. */
export interface CheckedEncoderOptions {
  readonly codec: VideoCodec;
  readonly width: number;
  readonly height: number;
  readonly fps: number;
  readonly bitrateKbps: number;
  readonly backend: EncoderBackend;
  readonly h264Profile: H264Profile;
  readonly syncBelowMs: number;
}

/**
 * One real-time video stream's encoder, whichever backend does the work (see
 * `EncoderBackendRegistry`): frames in, Annex-B access units (or VP8 frames) out.
 */
export interface VideoEncoder {
  readonly codec: VideoCodec;
  readonly width: number;
  readonly height: number;
  readonly bitrateKbps: number;
  /** The implementation encoding this stream (e.g. libx264, or NVENC on a GPU host). */
  readonly backend: EncoderBackend;
  readonly stats: VideoEncoderStats;
  /** Changes the target bitrate from the next frame on (network adaptation). */
  setBitrate(kbps: number): void;
  /** Makes the next encoded frame a keyframe (an IDR with SPS/PPS for H.264, with VPS/SPS/PPS for H.265). */
  requestKeyframe(): void;
  /**
   * Encodes one frame and returns its packet (zero-latency encoders give exactly one). Frames of
   * another size or format are converted; the pixels are read before this resolves, so the
   * caller may reuse `frame.data` once it has.
   */
  encode(frame: VideoFrame): Promise<EncodedVideoFrame[]>;
  /** Frees the encoder. Idempotent; later `encode` calls reject. */
  close(): void;
}

/**
 * How `VideoEncoder` drives a backend. `'ffmpeg'`: a node-av `CodecContext` for the FFmpeg encoder
 * called `name`, configured by `createFfmpegEncoderContext`. `'native-nvenc'`: Arclight's own NVENC
 * binding in the native addon (`NvencVideoEncoder`).
 */
export type EncoderImplementation = 'ffmpeg' | 'native-nvenc';

/** The implementation that encodes one codec: what /metrics and the start-up log report. */
export interface EncoderBackend {
  /** The encoder's name, e.g. `libx264` or `h264_nvenc` (for FFmpeg backends, FFmpeg's encoder name). */
  readonly name: string;
  readonly codec: VideoCodec;
  /** Encodes on dedicated hardware (GPU) rather than on the CPU. */
  readonly hardware: boolean;
  readonly implementation: EncoderImplementation;
}

/**
 * An encoder as the runtime opens it for a stream (`openStreamEncoder`, video-encoder-factory.ts):
 * the public interface plus what only some implementations can do, asked of the encoder itself
 * rather than of its class. Kept apart from `VideoEncoder` so the public interface stays as apps
 * see it; every implementation the runtime opens is one of these.
 */
export interface StreamVideoEncoder extends VideoEncoder {
  /**
   * Present when the encoder reads frames already in GPU memory (NV12, I420, BGRA or RGBA at the
   * encoder's size): nothing crosses to the host. The buffer must stay as it is until this resolves.
   */
  encodeCuda?(frame: CudaFrame, timestampUs?: number): Promise<EncodedVideoFrame[]>;
  /**
   * `false` when `setBitrate` does not reach a running encoder, so its stream keeps its opening
   * rate; absent, it does. Every encoder here follows it (FFmpeg's libvpx and libx265 wrappers by
   * reopening: ffmpeg-video-encoder.ts); kept for encoders that cannot.
   */
  readonly adjustsBitrateLive?: boolean;
}
