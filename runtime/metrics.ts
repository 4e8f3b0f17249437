/**
 * The runtime's Prometheus metrics, one registry per runtime instance (tests run several in one
 * process). Served as text at `GET /metrics`.
 */

import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { processEncoderBackends, type EncoderBackendRegistry } from './media/encoder-backends.ts';

export class RuntimeMetrics {
  readonly registry = new Registry();
  /** Whose selection `arclight_encoder_backend` reports (read at each scrape). */
  readonly #encoderBackends: EncoderBackendRegistry;

  readonly sessions = new Gauge({ name: 'arclight_sessions', help: 'Open sessions', registers: [this.registry] });
  readonly sessionsStarted = new Counter({ name: 'arclight_sessions_started_total', help: 'Sessions started', registers: [this.registry] });
  readonly connections = new Gauge({ name: 'arclight_connections', help: 'Live client connections', registers: [this.registry] });
  readonly commands = new Counter({
    name: 'arclight_commands_total',
    help: 'Commands handled, by command name and outcome (reply, ack, failed code)',
    labelNames: ['command', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly commandDuration = new Histogram({
    name: 'arclight_command_duration_seconds',
    help: 'Time from a command arriving to its outcome being sent',
    labelNames: ['command'] as const,
    buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 2],
    registers: [this.registry],
  });
  readonly framesEmitted = new Counter({
    name: 'arclight_frames_emitted_total',
    help: 'Frames the model handed to an output track',
    labelNames: ['track'] as const,
    registers: [this.registry],
  });
  readonly framesSent = new Counter({
    name: 'arclight_frames_sent_total',
    help: 'Encoded frames sent to clients (counted once per connection)',
    labelNames: ['track'] as const,
    registers: [this.registry],
  });
  readonly framesDropped = new Counter({
    name: 'arclight_frames_dropped_total',
    help: 'Frames dropped before encoding or sending, by track and reason',
    labelNames: ['track', 'reason'] as const,
    registers: [this.registry],
  });
  readonly sendBudgetWait = new Counter({
    name: 'arclight_send_budget_wait_seconds_total',
    help: "Time an output video track's pacer took no frame because its viewers' links were behind (send budget spent), by track",
    labelNames: ['track'] as const,
    registers: [this.registry],
  });
  readonly rtpRetransmitted = new Counter({
    name: 'arclight_rtp_retransmitted_packets_total',
    help: 'RTP packets resent from the send history: a client NACKed them, or they were resent unasked (arclight_rtp_unasked_resends_total), by track',
    labelNames: ['track'] as const,
    registers: [this.registry],
  });
  readonly rtpRetransmittedBytes = new Counter({
    name: 'arclight_rtp_retransmitted_bytes_total',
    help: 'Bytes of RTP packets resent, for NACKs or unasked (SRTP-protected, as on the wire), by track',
    labelNames: ['track'] as const,
    registers: [this.registry],
  });
  readonly rtpFecPackets = new Counter({
    name: 'arclight_rtp_fec_packets_total',
    help: 'FlexFEC repair packets sent (one per group of up to 8 packets of a frame, while a client that negotiated flexfec-03 reports loss on a path that does not queue), by track',
    labelNames: ['track'] as const,
    registers: [this.registry],
  });
  readonly rtpUnaskedResends = new Counter({
    name: 'arclight_rtp_unasked_resends_total',
    help: 'RTP packets resent that no NACK asked for (also in arclight_rtp_retransmitted_packets_total), by track and reason (feedback_loss: transport-wide feedback reported the copy lost; second_copy: a resend sent twice on a path that loses without queueing)',
    labelNames: ['track', 'reason'] as const,
    registers: [this.registry],
  });
  readonly rtpRetransmissionsRefused = new Counter({
    name: 'arclight_rtp_retransmissions_refused_total',
    help: 'NACKed RTP packets not resent, by track and reason (not_in_history, too_old, within_rtt, budget: docs/protocol.md, Loss recovery)',
    labelNames: ['track', 'reason'] as const,
    registers: [this.registry],
  });
  readonly keyframeRequestsThrottled = new Counter({
    name: 'arclight_video_keyframe_requests_throttled_total',
    help: 'Picture loss reports (PLI, FIR) ignored because a keyframe was asked for the same viewer less than max(300 ms, RTT) before',
    labelNames: ['track'] as const,
    registers: [this.registry],
  });
  readonly lossKeyframes = new Counter({
    name: 'arclight_video_loss_keyframe_requests_total',
    help: 'Keyframes the runtime asked for itself because it left a NACKed loss unrepaired (also counted in arclight_video_picture_loss_total)',
    labelNames: ['track'] as const,
    registers: [this.registry],
  });
  readonly bandwidthProbes = new Counter({
    name: 'arclight_bandwidth_probes_total',
    help: 'Bandwidth probes (a short cluster of RTX padding at twice the estimate) by the track that padded them and outcome: raised (the estimate rose to what got through), no_gain, saturated (the link was full), lost (too little feedback)',
    labelNames: ['track', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly framesReceived = new Counter({
    name: 'arclight_input_frames_total',
    help: 'Frames decoded from client input tracks',
    labelNames: ['track'] as const,
    registers: [this.registry],
  });
  readonly encodeDuration = new Histogram({
    name: 'arclight_encode_duration_seconds',
    help: 'Time to encode one video frame, by codec',
    labelNames: ['codec'] as const,
    buckets: [0.0005, 0.001, 0.002, 0.004, 0.008, 0.016, 0.033, 0.066],
    registers: [this.registry],
  });
  readonly cudaDownload = new Histogram({
    name: 'arclight_cuda_download_seconds',
    help: 'Host copy of one CUDA frame for a software encoder or the recorder, on a worker thread: copy (GPU to page-locked memory) and convert (to I420)',
    labelNames: ['track', 'stage'] as const,
    buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.004, 0.008, 0.016, 0.033],
    registers: [this.registry],
  });
  readonly framesConverted = new Counter({
    name: 'arclight_video_frames_converted_total',
    help: 'Output video frames converted to I420 once, before the encoders and the recorder read them, by track, source format (rgba) and converter (native: the addon; without it the encoders convert RGBA with swscale and nothing is counted)',
    labelNames: ['track', 'from', 'by'] as const,
    registers: [this.registry],
  });
  readonly pictureLoss = new Counter({
    name: 'arclight_video_picture_loss_total',
    help: 'Picture loss reports (RTCP PLI or FIR) received from viewers of an output video track',
    labelNames: ['track'] as const,
    registers: [this.registry],
  });
  readonly keyframesEncoded = new Counter({
    name: 'arclight_video_keyframes_total',
    help: 'Keyframes encoded for an output video track, by stream (viewers joining, picture loss, encoder restarts)',
    labelNames: ['track', 'codec'] as const,
    registers: [this.registry],
  });
  readonly emitToSend = new Histogram({
    name: 'arclight_video_emit_to_send_seconds',
    help: 'Time from the model emitting a video frame to its first packet leaving for a viewer (queue, pacing, encode)',
    labelNames: ['track'] as const,
    buckets: [0.002, 0.005, 0.01, 0.02, 0.033, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1],
    registers: [this.registry],
  });
  readonly webrtcConnectDuration = new Histogram({
    name: 'arclight_webrtc_connect_seconds',
    help: 'Time from receiving an SDP offer to the connection being ready',
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10],
    registers: [this.registry],
  });
  readonly targetBitrate = new Gauge({
    name: 'arclight_video_target_bitrate_bps',
    help: 'The encoder target bitrate per output track and codec (after network adaptation)',
    labelNames: ['track', 'codec'] as const,
    registers: [this.registry],
  });
  readonly playoutFps = new Gauge({
    name: 'arclight_video_playout_fps',
    help: "The rate an output video track plays at now: its declared fps, or for an adaptive track (fps: adaptive) the rate chosen from the model's throughput",
    labelNames: ['track'] as const,
    registers: [this.registry],
  });
  readonly productionFps = new Gauge({
    name: 'arclight_video_production_fps',
    help: "The model's production rate as an adaptive output video track estimates it (frames per second, unclamped); adaptive tracks only, once measured",
    labelNames: ['track'] as const,
    registers: [this.registry],
  });
  readonly clientLatency = new Gauge({
    name: 'arclight_client_glass_latency_seconds',
    help: 'Emit → presented latency as measured by clients (latest report), by track and quantile',
    labelNames: ['track', 'quantile'] as const,
    registers: [this.registry],
  });
  readonly encoderBackend = selectedEncoderBackendGauge(this.registry, () => this.#encoderBackends);
  readonly videoEncoderFailures = new Counter({
    name: 'arclight_video_encoder_failures_total',
    help: 'Video encoders that failed (to open or to encode) and were replaced, by track, stream codec, backend and action: restart (a fresh encoder of the same backend) or fallback (the backend was demoted process-wide and the next candidate is used)',
    labelNames: ['track', 'codec', 'backend', 'action'] as const,
    registers: [this.registry],
  });
  readonly moderationChecks = new Counter({
    name: 'arclight_moderation_checks_total',
    help: 'Commands with moderated text, by outcome: allowed, rejected, timeout (no verdict within the admission delay: run unchecked), error (the moderator failed: run unchecked)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  readonly moderationCheckDuration = new Histogram({
    name: 'arclight_moderation_check_duration_seconds',
    help: 'How long the moderator took to answer a check (answers and failures; abandoned checks are not observed)',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2],
    registers: [this.registry],
  });
  readonly modelLoadDuration = new Gauge({
    name: 'arclight_model_load_seconds',
    help: 'How long the model load() took',
    registers: [this.registry],
  });

  constructor(options: { processMetrics?: boolean; encoderBackends?: EncoderBackendRegistry } = {}) {
    this.#encoderBackends = options.encoderBackends ?? processEncoderBackends;
    if (options.processMetrics ?? true) collectDefaultMetrics({ register: this.registry, prefix: 'arclight_process_' });
  }

  async text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}

/**
 * `arclight_encoder_backend`: the encoder selected for each codec. The selection may change after
 * start-up (a demoted backend), so each scrape reads it from `backends()` rather than trusting
 * what start-up set; a function because the gauge is made before the constructor has the registry.
 */
function selectedEncoderBackendGauge(registry: Registry, backends: () => EncoderBackendRegistry): Gauge<'codec' | 'backend' | 'hardware'> {
  return new Gauge({
    name: 'arclight_encoder_backend',
    help: 'The encoder selected for each codec (1 = selected): chosen at start-up, and moved on when a backend that keeps failing is demoted',
    labelNames: ['codec', 'backend', 'hardware'] as const,
    registers: [registry],
    collect() {
      const current = backends().current();
      if (current.length === 0) return;
      this.reset();
      for (const { codec, backend } of current) this.set({ codec, backend: backend.name, hardware: String(backend.hardware) }, 1);
    },
  });
}
