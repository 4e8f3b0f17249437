/**
 * What `startRuntime()` takes (`RuntimeOptions` and its parts) and the one pure step from those
 * options to the settings the runtime runs with: every default filled in, every cross-option
 * check made. Kept apart from the composition (server.ts) so that what an option means, and
 * which combinations are refused, can be read and tested without starting anything.
 */

import type { LatencyMode } from '../protocol/messages.ts';
import { MAX_MESSAGE_BYTES } from '../protocol/messages.ts';
import type { IceServerEntry } from '../protocol/transport.ts';
import type { Logger } from '../server-kit/log.ts';
import type { HostedOptions } from './hosted/coordinator-link.ts';
import type { PlaygroundHostedOptions } from './http/playground-routes.ts';
import type { SessionLogSettings } from './logs/session-log-registry.ts';
import type { ModelDefinition } from './model/definition.ts';
import type { ModerationOptions } from './moderation/moderator.ts';
import type { RecordingSettings } from './recording/recording-registry.ts';
import type { RecordingStorage } from './recording/recording-storage.ts';
import { DEFAULT_SEGMENT_SECONDS } from './recording/track-recorder.ts';
import type { UploadLimits } from './uploads/upload-store.ts';
import type { IcePolicyOptions } from './transport/signalling/ice-policy.ts';
import type { VideoCodec } from './media/video-encoder.ts';
import { ADAPTATION, type BitrateBounds } from './media/video-bitrate-adaptation.ts';
import type { TurnOptions } from './transport/signalling/turn-credentials.ts';

export interface RuntimeOptions {
  readonly model: ModelDefinition<never>;
  /** HTTP port; 0 picks a free one. Default 8080. */
  readonly port?: number;
  /** HTTP listen address. Default 127.0.0.1. */
  readonly host?: string;
  /**
   * ICE: which addresses and UDP ports the runtime's peers use and advertise, and the STUN/TURN
   * servers clients get from `GET .../transport/webrtc/ice_servers` (see RuntimeIceOptions and
   * docs/operations.md "Media reachability (TURN)"). Default: every interface, any free port,
   * no servers.
   */
  readonly ice?: RuntimeIceOptions;
  /**
   * Video latency mode for every session: `realtime` (browsers render each frame as soon as it
   * is decoded: lowest latency, no smoothing) or `smooth` (bounded buffering for lossy links).
   * Default: the model's `latencyMode`, else `smooth`. Sessions can switch at run time.
   */
  readonly latencyMode?: LatencyMode;
  /**
   * Origins allowed to call the runtime from a browser page served elsewhere (CORS). Default
   * `*`: a local runtime is a development server, and nothing it serves depends on cookies.
   * Operators behind a coordinator can pin this to their app's origin.
   */
  readonly corsOrigins?: '*' | readonly string[];
  /** Serve the playground at `/`. Default true. */
  readonly playground?: boolean;
  /**
   * Lets the playground also connect in hosted mode, through this coordinator, with tokens the
   * runtime mints for the page (`POST /playground/token`; the API key stays in this process).
   * Default: local mode only. `arclight stack` sets it (dev/local-stack.ts).
   */
  readonly playgroundHosted?: PlaygroundHostedOptions;
  /** A session with no connected client ends after this long. Default 60 s. */
  readonly reconnectGraceSeconds?: number;
  /** Ends every session this long after it starts. Default: no limit in local mode. */
  readonly maxSessionSeconds?: number;
  /** Largest data-channel message accepted. Default 256 KiB. */
  readonly maxMessageBytes?: number;
  /**
   * Bounds of network adaptation: each video stream's encoder follows its viewers' bandwidth
   * estimate (transport-cc or REMB, ×0.9) within [minBitrateKbps, maxBitrateKbps], and never
   * above the track's own `bitrateKbps`. Default 500 and 10,000. Below the floor the track's send
   * budget holds frames back instead (docs/model-authors.md "Pacing, backpressure and flush").
   */
  readonly video?: { readonly minBitrateKbps?: number; readonly maxBitrateKbps?: number };
  readonly logger?: Logger;
  /**
   * Output video codecs in order of preference; each client gets the first one it offers.
   * Default: H.264 then VP8, with H.265 first when a hardware H.265 encoder was found.
   */
  readonly videoCodecs?: readonly VideoCodec[];
  /**
   * Hosted mode: register with a coordinator, which opens sessions here and relays clients'
   * transport calls (docs/coordinator.md). The local session endpoints close, and session paths
   * need the runtime secret. Default: local mode.
   */
  readonly hosted?: HostedOptions;
  /**
   * Uploads (`POST /sessions/{id}/uploads`, presigned PUT/GET): size and type limits, and where
   * files are kept (default a fresh folder under the OS temp dir, removed at close).
   */
  readonly uploads?: UploadLimits & {
    readonly directory?: string;
    /** Milliseconds since the epoch for URL expiry; default `Date.now` (tests move it). */
    readonly now?: () => number;
  };
  /**
   * Checks the free-text parameters a model marked `moderated()` with this moderator before
   * the command runs (docs/model-authors.md "Moderation"). Default: nothing is moderated.
   */
  readonly moderation?: ModerationOptions;
  /**
   * Records one output video track of each session (the first, or `recording.track`) with the
   * first output audio track as fMP4 HLS segments (H.264 + AAC, ~4 s) for
   * requestClip/requestRecording. It costs one more encode per frame, so it is opt-in here;
   * `arclight serve` turns it on (`--no-recording` to skip). Default: off.
   */
  readonly recording?: RecordingOptions;
  /**
   * Each session's log — its model's `session.log` lines and the runtime's account of the session
   * (connections, commands with outcome and latency, errors, recording, why it ended) — readable
   * with the session's credentials (`GET /sessions/{id}/logs`, `…/logs/stream`). Bounds default to
   * 10,000 lines or 10 MB; after the session ends it stays as long as its recording would (five
   * minutes), on the recording's clock unless `now` is given.
   */
  readonly sessionLogs?: SessionLogSettings;
  /**
   * Development mode (`arclight dev`): also serves `GET /dev/status` — the model version serving
   * and the last load error (`model_load_failed`, with file and line) — for the playground and
   * tools. Default off.
   */
  readonly dev?: boolean;
}

/** `RuntimeOptions.ice`. */
export interface RuntimeIceOptions extends IcePolicyOptions {
  /**
   * Servers handed to every client as they are (e.g. a public STUN server, or a TURN server with
   * fixed credentials). The runtime's own peers use them too. Default none.
   */
  readonly servers?: readonly IceServerEntry[];
  /**
   * A TURN server sharing a secret with the runtime (coturn `use-auth-secret` +
   * `static-auth-secret`): each `ice_servers` response adds an entry for `urls` with a fresh
   * credential valid for `ttlSeconds` (username `<unix expiry>:<session id>`, password
   * base64(HMAC-SHA1(secret, username))). The secret never leaves the process. Clients behind
   * restrictive networks (or with `iceTransportPolicy: 'relay'`) then reach the runtime through
   * the TURN server, which must be able to send UDP to the runtime's host candidates. The
   * runtime's own peers do not allocate on it. Default: no TURN entry.
   */
  readonly turn?: TurnOptions;
}

export interface RecordingOptions extends Omit<RecordingSettings, 'storage'> {
  /** Default: local disk under `directory` (default a fresh folder in the OS temp dir, removed at close). */
  readonly storage?: RecordingStorage;
  readonly directory?: string;
  /** Milliseconds since the epoch (the 5-minute window after a session ends); tests move it. */
  readonly now?: () => number;
}

/** The options with every default filled in: what the runtime's parts are built from. */
export interface RuntimeSettings {
  readonly port: number;
  readonly listenHost: string;
  readonly corsOrigins: '*' | readonly string[];
  readonly playground: boolean;
  readonly dev: boolean;
  /** `ice.servers`: handed to clients, and used by the runtime's own peers. */
  readonly iceServers: readonly IceServerEntry[];
  readonly videoCodecs: readonly VideoCodec[];
  readonly reconnectGraceMs: number;
  /** Absent: sessions have no time limit of their own. */
  readonly maxDurationMs?: number;
  readonly maxMessageBytes: number;
  readonly latencyMode: LatencyMode;
  /** Network adaptation's bounds, when the operator set any (else the defaults, ADAPTATION). */
  readonly videoBitrate?: BitrateBounds;
}

/** What the defaults depend on besides the options: the model, and the encoders found. */
export interface RuntimeFacts {
  /** The model, validated. */
  readonly model: ModelDefinition<unknown>;
  /** Whether a hardware H.265 encoder was found (H.265 then leads the default codec list). */
  readonly hardwareH265: boolean;
}

/** Checks the options against each other and the model, and fills in the defaults; throws TypeError on a refused combination. */
export function resolveRuntimeSettings(options: RuntimeOptions, { model, hardwareH265 }: RuntimeFacts): RuntimeSettings {
  const recording = options.recording;
  // A track name the model does not have would leave every session unrecorded: fail the start,
  // where the operator sees it, not each clip request. (A model reloaded by `arclight dev` without
  // that track is only warned about, per session: the runtime keeps serving.)
  if (
    recording?.track !== undefined &&
    !model.tracks.some((t) => t.kind === 'video' && t.direction === 'recvonly' && t.name === recording.track)
  ) {
    const outputs = model.tracks.filter((t) => t.kind === 'video' && t.direction === 'recvonly').map((t) => t.name);
    throw new TypeError(
      `recording.track "${recording.track}" is not an output video track of model "${model.name}" (its output video tracks: ${outputs.join(', ') || 'none'})`,
    );
  }
  // A clip is whole segments and never longer than the cap: the cap must hold one segment.
  if (recording?.maxClipSeconds !== undefined && recording.maxClipSeconds < (recording.segmentSeconds ?? DEFAULT_SEGMENT_SECONDS)) {
    throw new TypeError(
      `recording.maxClipSeconds (${recording.maxClipSeconds}) must be at least the segment length (${recording.segmentSeconds ?? DEFAULT_SEGMENT_SECONDS} s)`,
    );
  }
  const videoBitrate = bitrateBounds(options.video);
  return {
    ...(videoBitrate ? { videoBitrate } : {}),
    port: options.port ?? 8080,
    listenHost: options.host ?? '127.0.0.1',
    corsOrigins: options.corsOrigins ?? '*',
    playground: options.playground ?? true,
    dev: options.dev ?? false,
    iceServers: options.ice?.servers ?? [],
    videoCodecs: options.videoCodecs ?? (hardwareH265 ? ['h265', 'h264', 'vp8'] : ['h264', 'vp8']),
    reconnectGraceMs: (options.reconnectGraceSeconds ?? 60) * 1000,
    ...(options.maxSessionSeconds === undefined ? {} : { maxDurationMs: options.maxSessionSeconds * 1000 }),
    maxMessageBytes: options.maxMessageBytes ?? MAX_MESSAGE_BYTES,
    latencyMode: options.latencyMode ?? model.latencyMode ?? 'smooth',
  };
}

/** The operator's adaptation bounds with the defaults filled in; throws TypeError on a bad pair. */
function bitrateBounds(video: RuntimeOptions['video']): BitrateBounds | undefined {
  if (video?.minBitrateKbps === undefined && video?.maxBitrateKbps === undefined) return undefined;
  const minKbps = video.minBitrateKbps ?? ADAPTATION.minKbps;
  const maxKbps = video.maxBitrateKbps ?? ADAPTATION.maxKbps;
  for (const [name, value] of [
    ['video.minBitrateKbps', minKbps],
    ['video.maxBitrateKbps', maxKbps],
  ] as const) {
    if (!Number.isFinite(value) || value < 50 || value > 100_000)
      throw new TypeError(`${name} must be from 50 to 100,000 kbit/s; got ${value}`);
  }
  if (minKbps > maxKbps) throw new TypeError(`video.minBitrateKbps (${minKbps}) must not be above video.maxBitrateKbps (${maxKbps})`);
  return { minKbps, maxKbps };
}
