/**
 * Version negotiation middleware. A client that names a protocol version newer than this
 * server implements gets 501; one older than the server still serves gets 426 — the statuses
 * 2.9.0 maps to SERVER_VERSION_TOO_OLD and CLIENT_VERSION_TOO_OLD. No header: assume current.
 */

import type { MiddlewareHandler } from 'hono';
import { ArclightError } from '../../protocol/errors.ts';
import {
  API_VERSION,
  API_VERSION_HEADER,
  MIN_API_VERSION,
  WEBRTC_VERSION,
  WEBRTC_VERSION_HEADER,
} from '../../protocol/versions.ts';

export const checkApiVersion: MiddlewareHandler = async (c, next) => {
  const header = c.req.header(API_VERSION_HEADER);
  if (header !== undefined) {
    const version = /^\d{1,4}$/.test(header) ? Number(header) : NaN;
    if (!Number.isInteger(version)) {
      throw new ArclightError('invalid_request', `${API_VERSION_HEADER} must be an integer; got "${header}".`);
    }
    if (version > API_VERSION) {
      throw new ArclightError('version_not_implemented', `This server implements API version ${API_VERSION}; the client asked for ${version}.`);
    }
    if (version < MIN_API_VERSION) {
      throw new ArclightError('unsupported_version', `API version ${version} is no longer served; upgrade the client (minimum ${MIN_API_VERSION}).`);
    }
  }
  await next();
};

export const checkWebrtcVersion: MiddlewareHandler = async (c, next) => {
  const header = c.req.header(WEBRTC_VERSION_HEADER);
  if (header !== undefined) {
    const major = /^\d{1,4}(\.\d{1,4})?$/.test(header) ? Number(header.split('.')[0]) : NaN;
    const ours = Number(WEBRTC_VERSION.split('.')[0]);
    if (!Number.isInteger(major)) {
      throw new ArclightError('invalid_request', `${WEBRTC_VERSION_HEADER} must look like "1.0"; got "${header}".`);
    }
    if (major > ours) {
      throw new ArclightError('version_not_implemented', `This server implements WebRTC signalling ${WEBRTC_VERSION}; the client asked for ${header}.`);
    }
    if (major < ours) {
      throw new ArclightError('unsupported_version', `WebRTC signalling ${header} is no longer served; upgrade the client.`);
    }
  }
  await next();
};
