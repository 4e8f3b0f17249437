/**
 * JSON Schemas (draft 2020-12) of every body and message Arclight accepts. The runtime validates
 * inbound data against these; docs and the OpenAPI document embed them.
 */

const trackKind = { enum: ['video', 'audio'] } as const;
const trackDirection = { enum: ['sendonly', 'recvonly'] } as const;
const clientInfo = {
  type: 'object',
  properties: { sdk_version: { type: 'string' }, sdk_type: { type: 'string' } },
} as const;

export const startSessionRequestSchema = {
  $id: 'arclight:start_session_request',
  type: 'object',
  properties: {
    extra_args: { type: 'object' },
    client_info: clientInfo,
  },
} as const;

export const stopSessionRequestSchema = {
  $id: 'arclight:stop_session_request',
  type: 'object',
  properties: {
    session_id: { type: 'string', maxLength: 128 },
    reason: { type: 'string', maxLength: 64 },
  },
} as const;

export const trackMappingEntrySchema = {
  type: 'object',
  required: ['mid', 'name', 'kind', 'direction'],
  properties: {
    mid: { type: 'string', maxLength: 32 },
    name: { type: 'string', maxLength: 128 },
    kind: trackKind,
    direction: trackDirection,
  },
} as const;

/** Largest SDP offer accepted; real offers are a few KB. */
export const MAX_SDP_BYTES = 64 * 1024;

export const sdpOfferRequestSchema = {
  $id: 'arclight:sdp_offer_request',
  type: 'object',
  required: ['sdp_offer'],
  properties: {
    sdp_offer: { type: 'string', minLength: 1, maxLength: MAX_SDP_BYTES },
    track_mapping: { type: 'array', maxItems: 64, items: trackMappingEntrySchema },
    client_info: clientInfo,
    paused_tracks: { type: 'array', maxItems: 64, items: { type: 'string' } },
  },
} as const;

/** Trickled candidates per request; a browser gathers a handful per network interface. */
export const MAX_TRICKLED_CANDIDATES = 64;

export const iceCandidatesRequestSchema = {
  $id: 'arclight:ice_candidates_request',
  type: 'object',
  required: ['candidates'],
  additionalProperties: false,
  properties: {
    candidates: {
      type: 'array',
      maxItems: MAX_TRICKLED_CANDIDATES,
      items: {
        type: 'object',
        required: ['candidate'],
        additionalProperties: false,
        properties: {
          candidate: { type: 'string', minLength: 1, maxLength: 1024 },
          sdp_mid: { type: 'string', minLength: 1, maxLength: 64 },
          sdp_m_line_index: { type: 'integer', minimum: 0, maximum: 1023 },
          username_fragment: { type: 'string', minLength: 1, maxLength: 256 },
        },
      },
    },
    end_of_candidates: { type: 'boolean' },
  },
} as const;

export const envelopeSchema = {
  $id: 'arclight:envelope',
  type: 'object',
  required: ['scope', 'data'],
  properties: {
    scope: { enum: ['application', 'runtime'] },
    data: {
      type: 'object',
      required: ['type'],
      properties: {
        type: { type: 'string', minLength: 1, maxLength: 128 },
        request_id: { type: 'string', minLength: 1, maxLength: 64 },
        uploads: { type: 'object' },
      },
    },
  },
} as const;

export const trackSubscriptionDataSchema = {
  type: 'object',
  required: ['track', 'subscribed'],
  additionalProperties: false,
  properties: { track: { type: 'string' }, subscribed: { type: 'boolean' } },
} as const;

export const trackNameDataSchema = {
  type: 'object',
  required: ['track'],
  additionalProperties: false,
  properties: { track: { type: 'string' } },
} as const;

export const publishTrackDataSchema = {
  type: 'object',
  required: ['track'],
  additionalProperties: false,
  properties: { track: { type: 'string' }, frame_metadata: { type: 'boolean' } },
} as const;

/** Largest number of frames one `input_frame_metadata` message may annotate. */
export const MAX_INPUT_FRAME_ANNOTATIONS = 64;

export const inputFrameMetadataDataSchema = {
  type: 'object',
  required: ['track', 'frames'],
  additionalProperties: false,
  properties: {
    track: { type: 'string' },
    frames: {
      type: 'array',
      minItems: 1,
      maxItems: MAX_INPUT_FRAME_ANNOTATIONS,
      items: {
        type: 'object',
        required: ['rtp_timestamp'],
        additionalProperties: false,
        properties: {
          rtp_timestamp: { type: 'integer', minimum: 0, maximum: 0xffffffff },
          capture_time: { type: 'number', minimum: 0 },
          metadata: { type: 'object' },
        },
      },
    },
  },
} as const;

export const setLatencyModeDataSchema = {
  type: 'object',
  required: ['mode'],
  additionalProperties: false,
  properties: { mode: { enum: ['realtime', 'smooth'] } },
} as const;

export const subscribeFrameTimesDataSchema = {
  type: 'object',
  required: ['track', 'subscribed'],
  additionalProperties: false,
  properties: { track: { type: 'string' }, subscribed: { type: 'boolean' } },
} as const;

export const latencyReportDataSchema = {
  type: 'object',
  required: ['track', 'p50_ms', 'p95_ms'],
  properties: {
    track: { type: 'string' },
    p50_ms: { type: 'number', minimum: 0, maximum: 600000 },
    p95_ms: { type: 'number', minimum: 0, maximum: 600000 },
    samples: { type: 'integer', minimum: 0 },
  },
} as const;
