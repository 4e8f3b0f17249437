/**
 * Which implementation encodes each video codec: the backend registry.
 *
 * Every codec has a list of candidate backends in order of preference (hardware first). The first
 * time a codec is asked for, each candidate is probed in turn by actually opening it the way
 * `VideoEncoder` would and encoding one small frame (encoder-probes.ts); the first that works is
 * selected and cached for the life of the registry, and why each earlier one was passed over is
 * kept for the start-up log and /metrics. A backend that keeps failing in use is demoted and the
 * selection moves on (its failure policy, encoder-failures.ts, decides when).
 *
 * The registry is a class so that whoever needs the selection (the encoder factory, output
 * tracks, /metrics) is handed one instance rather than reaching into module state. The runtime
 * has one per process, `processEncoderBackends` below, which startRuntime hands down.
 */
import {
  FF_ENCODER_H264_NVENC,
  FF_ENCODER_HEVC_NVENC,
  FF_ENCODER_LIBVPX_VP8,
  FF_ENCODER_LIBX264,
  FF_ENCODER_LIBX265,
} from 'node-av/constants';
import { ENCODER_FAILURE_LIMIT, EncoderFailurePolicy, type EncoderFailureLimit } from './encoder-failures.ts';
import { probeFfmpegBackend, probeNativeNvenc, type BackendAvailability } from './encoder-probes.ts';
import type { EncoderBackend, VideoCodec } from './video-encoder.ts';

export type { EncoderBackend, EncoderImplementation } from './video-encoder.ts';
export type { BackendAvailability } from './encoder-probes.ts';

/** One entry of a codec's preference list. */
export interface EncoderBackendCandidate {
  readonly backend: EncoderBackend;
  /**
   * Whether the backend can encode on this machine, found by trying. Called at most once per registry
   * per codec (the selection is cached), and only if every candidate before it was unavailable.
   * Should not throw; a throw counts as unavailable with its message as the reason.
   */
  available(): Promise<BackendAvailability>;
}

/** What happened to one candidate during selection. */
export interface EncoderCandidateOutcome {
  readonly name: string;
  readonly hardware: boolean;
  /** `'selected'`, `'unavailable: <reason>'`, or `'not probed'` (an earlier candidate was selected). */
  readonly status: string;
}

export interface EncoderBackendSelection {
  readonly codec: VideoCodec;
  readonly backend: EncoderBackend;
  /** Every candidate, in preference order, with what happened to it. */
  readonly candidates: readonly EncoderCandidateOutcome[];
}

/** A codec in a listing: its selection, or `backend: null` when no candidate works. */
export interface EncoderBackendListing {
  readonly codec: VideoCodec;
  readonly backend: EncoderBackend | null;
  readonly candidates: readonly EncoderCandidateOutcome[];
}

/** No candidate could encode the codec; `candidates` says why for each. */
export class NoEncoderBackendError extends Error {
  override readonly name = 'NoEncoderBackendError';
  readonly codec: VideoCodec;
  readonly candidates: readonly EncoderCandidateOutcome[];

  constructor(codec: VideoCodec, candidates: readonly EncoderCandidateOutcome[]) {
    const tried = candidates.map((o) => `${o.name} ${o.status}`).join('; ');
    super(`no usable ${codec} encoder: ${tried || 'no candidates'}`);
    this.codec = codec;
    this.candidates = candidates;
  }
}

export const VIDEO_CODECS: readonly VideoCodec[] = ['h264', 'h265', 'vp8'];

function ffmpegBackend(codec: VideoCodec, name: string, hardware: boolean): EncoderBackendCandidate {
  const backend: EncoderBackend = Object.freeze({ name, codec, hardware, implementation: 'ffmpeg' });
  return { backend, available: () => probeFfmpegBackend(backend) };
}

/** Arclight's NVENC binding: available when the addon is built with NVENC and a session opens. */
function nativeNvencBackend(codec: 'h264' | 'h265'): EncoderBackendCandidate {
  const name = codec === 'h264' ? 'arclight_nvenc_h264' : 'arclight_nvenc_hevc';
  const backend: EncoderBackend = Object.freeze({ name, codec, hardware: true, implementation: 'native-nvenc' });
  return { backend, available: () => probeNativeNvenc(backend) };
}

/**
 * Preference order per codec: Arclight's NVENC binding, then NVENC through FFmpeg, then the
 * software encoder.
 */
export const ENCODER_BACKEND_CANDIDATES: Readonly<Record<VideoCodec, readonly EncoderBackendCandidate[]>> = {
  h264: [nativeNvencBackend('h264'), ffmpegBackend('h264', FF_ENCODER_H264_NVENC, true), ffmpegBackend('h264', FF_ENCODER_LIBX264, false)],
  h265: [nativeNvencBackend('h265'), ffmpegBackend('h265', FF_ENCODER_HEVC_NVENC, true), ffmpegBackend('h265', FF_ENCODER_LIBX265, false)],
  vp8: [ffmpegBackend('vp8', FF_ENCODER_LIBVPX_VP8, false)],
};

/**
 * The selection of each codec's backend, probed on first use and then cached, with the
 * demotions of backends that failed in use and the failure policy that decides them.
 */
export class EncoderBackendRegistry {
  readonly #candidates: Readonly<Record<VideoCodec, readonly EncoderBackendCandidate[]>>;
  readonly #selections = new Map<VideoCodec, Promise<EncoderBackendSelection>>();
  /** The settled selections, for a synchronous read (/metrics); absent while one is being probed. */
  readonly #settled = new Map<VideoCodec, EncoderBackend>();
  /**
   * Backends demoted after they failed in use (`demote`), per codec: backend name → why. A
   * demoted backend is never selected again by this registry.
   */
  readonly #demotions = new Map<VideoCodec, Map<string, string>>();
  /** Restart or fall back when an encoder fails; its demotions land here. */
  readonly failures: EncoderFailurePolicy;

  constructor(
    candidates: Readonly<Record<VideoCodec, readonly EncoderBackendCandidate[]>> = ENCODER_BACKEND_CANDIDATES,
    failureLimit: EncoderFailureLimit = ENCODER_FAILURE_LIMIT,
  ) {
    this.#candidates = candidates;
    this.failures = new EncoderFailurePolicy(failureLimit, (codec, backendName, reason) => this.demote(codec, backendName, reason));
  }

  /** The backend that encodes `codec`; probed on first use, then cached. */
  async select(codec: VideoCodec): Promise<EncoderBackend> {
    return (await this.selection(codec)).backend;
  }

  /**
   * `select` with the outcome of every candidate. Rejects with a `NoEncoderBackendError` if no
   * candidate works.
   */
  selection(codec: VideoCodec): Promise<EncoderBackendSelection> {
    if (!Object.hasOwn(this.#candidates, codec)) {
      return Promise.reject(new RangeError(`unsupported video codec ${String(codec)}`));
    }
    const candidates = this.#withDemotions(codec, this.#candidates[codec]);
    let selection = this.#selections.get(codec);
    if (!selection) {
      const choosing = chooseEncoderBackend(codec, candidates);
      selection = choosing;
      this.#selections.set(codec, choosing);
      choosing.then(
        (chosen) => {
          if (this.#selections.get(codec) === choosing) this.#settled.set(codec, chosen.backend);
        },
        // A failure is not cached: nothing worked, so the next caller may as well try again.
        () => {
          if (this.#selections.get(codec) === choosing) this.#selections.delete(codec);
        },
      );
    }
    return selection;
  }

  /** A demoted candidate stays in the list (the listing says why it is passed over) but is never available. */
  #withDemotions(codec: VideoCodec, candidates: readonly EncoderBackendCandidate[]): readonly EncoderBackendCandidate[] {
    const demoted = this.#demotions.get(codec);
    if (!demoted) return candidates;
    return candidates.map((candidate) => {
      const reason = demoted.get(candidate.backend.name);
      if (reason === undefined) return candidate;
      return {
        backend: candidate.backend,
        available: () => Promise.resolve({ available: false, reason: `demoted after failing in use (${reason})` }),
      };
    });
  }

  /**
   * Stops using `backendName` for `codec`, because it kept failing in use (an NVENC session
   * losing its GPU, say): the selection moves on to the next candidate (e.g. arclight_nvenc_h264 →
   * h264_nvenc → libx264), which is probed at once so /metrics and `list()` show it; encoders
   * already open are left to their owners. Returns whether it demoted: not when the backend is
   * unknown, already demoted, or has no candidate after it left — with nothing to fall back to,
   * restarting it is all there is to do.
   */
  demote(codec: VideoCodec, backendName: string, reason: string): boolean {
    if (!Object.hasOwn(this.#candidates, codec)) return false;
    const candidates = this.#candidates[codec];
    const demoted = this.#demotions.get(codec) ?? new Map<string, string>();
    const index = candidates.findIndex((c) => c.backend.name === backendName);
    if (index < 0 || demoted.has(backendName)) return false;
    // Only a later candidate can take over: the earlier ones were unavailable when this one was selected.
    if (!candidates.slice(index + 1).some((c) => !demoted.has(c.backend.name))) return false;
    demoted.set(backendName, reason);
    this.#demotions.set(codec, demoted);
    this.#selections.delete(codec);
    this.#settled.delete(codec);
    // Probed now rather than at the next encoder open, so the listing and /metrics follow at once.
    this.selection(codec).catch(() => {});
    return true;
  }

  /** The backend selected for each codec whose selection has settled: what `arclight_encoder_backend` reports. */
  current(): { codec: VideoCodec; backend: EncoderBackend }[] {
    return VIDEO_CODECS.flatMap((codec) => {
      const backend = this.#settled.get(codec);
      return backend ? [{ codec, backend }] : [];
    });
  }

  /** TEST ONLY. Forgets every demotion and cached selection, so the next use probes afresh. */
  forgetDemotions(): void {
    this.#demotions.clear();
    this.#selections.clear();
    this.#settled.clear();
  }

  /**
   * The selection for every codec, for /metrics and the start-up log; probes those not yet selected.
   * Does not reject for a codec nothing can encode: that one is listed with `backend: null`.
   */
  async list(): Promise<EncoderBackendListing[]> {
    const out: EncoderBackendListing[] = [];
    // One codec after another: probes are serialised anyway, and the order stays stable.
    for (const codec of VIDEO_CODECS) {
      try {
        out.push(await this.selection(codec));
      } catch (error) {
        if (!(error instanceof NoEncoderBackendError)) throw error;
        out.push({ codec, backend: null, candidates: error.candidates });
      }
    }
    return out;
  }
}

/**
 * The process's encoder backends. The selection is process-wide by nature (one GPU, one FFmpeg
 * build, probed once), so there is one registry per process, named only here: startRuntime (the
 * composition root) hands it to /metrics, the start-up report and, through the session host and
 * each session, to every output track. Only what has no runtime to be handed one by falls back to
 * it: the public `VideoEncoder.create`, a lone `OutputVideoTrack` or `RuntimeMetrics` in tests and
 * benches. New code takes a registry as a parameter instead of importing this.
 */
export const processEncoderBackends = new EncoderBackendRegistry();

/** The process registry's `list()`: what the runtime logs at start-up (a public export). */
export function listEncoderBackends(): Promise<EncoderBackendListing[]> {
  return processEncoderBackends.list();
}

/** One line per codec, e.g. `h264: libx264 (software; h264_nvenc unavailable: ...)`. */
export function describeEncoderBackendSelection(selection: EncoderBackendListing): string {
  const { backend, candidates } = selection;
  const passedOver = candidates.filter((c) => c.status.startsWith('unavailable')).map((c) => `${c.name} ${c.status}`);
  if (!backend) return `${selection.codec}: none (${passedOver.join('; ') || 'no candidates'})`;
  const kind = backend.hardware ? 'hardware' : 'software';
  return `${selection.codec}: ${backend.name} (${[kind, ...passedOver].join('; ')})`;
}

/**
 * Probes `candidates` in order and picks the first available one, uncached. Exported for tests and
 * for a later backend that wants to re-check; the runtime uses `EncoderBackendRegistry.select`.
 */
export async function chooseEncoderBackend(
  codec: VideoCodec,
  candidates: readonly EncoderBackendCandidate[],
): Promise<EncoderBackendSelection> {
  const outcomes: EncoderCandidateOutcome[] = candidates.map(({ backend }) => ({
    name: backend.name,
    hardware: backend.hardware,
    status: 'not probed',
  }));
  for (const [index, candidate] of candidates.entries()) {
    let result: BackendAvailability;
    try {
      result = await candidate.available();
    } catch (error) {
      result = { available: false, reason: error instanceof Error ? error.message : String(error) };
    }
    if (result.available) {
      outcomes[index] = { ...outcomes[index]!, status: 'selected' };
      return { codec, backend: candidate.backend, candidates: outcomes };
    }
    outcomes[index] = { ...outcomes[index]!, status: `unavailable: ${result.reason}` };
  }
  throw new NoEncoderBackendError(codec, outcomes);
}
