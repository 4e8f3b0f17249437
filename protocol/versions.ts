import { ArclightError } from './errors.ts';

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
/**
 * Arclight's own release (semver), reported as `server_info.server_version` and in both servers'
 * `GET /health`. Equal to package.json's version and CHANGELOG.md's newest release
 * (test/docs/versioning.test.ts).
 */
export const SERVER_VERSION = '0.1.0';

/**
 * Checks a request's `Reactor-API-Version` (undefined: absent, the current version is assumed).
 * Throws 501 `version_not_implemented` for a newer version than served, 426
 * `unsupported_version` for an older one — the statuses 2.9.0 maps to SERVER_VERSION_TOO_OLD and
 * CLIENT_VERSION_TOO_OLD — and 400 for a malformed value.
 */
export function checkApiVersionHeader(header: string | undefined): void {
  if (header === undefined) return;
  const version = /^\d{1,4}$/.test(header) ? Number(header) : NaN;
  if (!Number.isInteger(version)) {
    throw new ArclightError('invalid_request', `${API_VERSION_HEADER} must be an integer; got "${header}".`);
  }
  if (version > API_VERSION) {
    throw new ArclightError(
      'version_not_implemented',
      `This server implements API version ${API_VERSION}; the client asked for ${version}.`,
    );
  }
  if (version < MIN_API_VERSION) {
    throw new ArclightError(
      'unsupported_version',
      `API version ${version} is no longer served; upgrade the client (minimum ${MIN_API_VERSION}).`,
    );
  }
}

/** The same for `Reactor-WebRTC-Version` on transport calls (the major version decides). */
export function checkWebrtcVersionHeader(header: string | undefined): void {
  if (header === undefined) return;
  const major = /^\d{1,4}(\.\d{1,4})?$/.test(header) ? Number(header.split('.')[0]) : NaN;
  const ours = Number(WEBRTC_VERSION.split('.')[0]);
  if (!Number.isInteger(major)) {
    throw new ArclightError('invalid_request', `${WEBRTC_VERSION_HEADER} must look like "1.0"; got "${header}".`);
  }
  if (major > ours) {
    throw new ArclightError(
      'version_not_implemented',
      `This server implements WebRTC signalling ${WEBRTC_VERSION}; the client asked for ${header}.`,
    );
  }
  if (major < ours) {
    throw new ArclightError('unsupported_version', `WebRTC signalling ${header} is no longer served; upgrade the client.`);
  }
}
