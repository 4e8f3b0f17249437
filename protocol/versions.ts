/**
 * Protocol version headers. The names and values are those of the wire protocol that
 * `@reactor-team/js-sdk@2.9.0` speaks, so that an unmodified app built on it can talk to Arclight.
 */

/** Sent on session calls (`/start_session`, `/sessions`, ...): the API version the client speaks. */
export const API_VERSION_HEADER = 'Reactor-API-Version';
/** Sent on session calls: the highest API version the client accepts in replies. */
export const API_ACCEPT_VERSION_HEADER = 'Reactor-API-Accept-Version';
/** Sent on transport calls (`.../transport/webrtc/...`): the WebRTC signalling version. */
export const WEBRTC_VERSION_HEADER = 'Reactor-WebRTC-Version';

export const API_VERSION = 1;
/** The oldest API version this server still serves; older gets 426. */
export const MIN_API_VERSION = 1;
export const WEBRTC_VERSION = '1.0';
/** Capabilities protocol version reported in `capabilities.protocol_version`. */
export const CAPABILITIES_PROTOCOL_VERSION = '1.0';
/** Arclight's own release, reported as `server_info.server_version`. */
export const SERVER_VERSION = '0.1.0';
