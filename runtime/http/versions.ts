/**
 * Version negotiation middleware: the checks themselves are the protocol's
 * (protocol/versions.ts), shared with the coordinator. No header: assume current.
 */

import type { MiddlewareHandler } from 'hono';
import { API_VERSION_HEADER, WEBRTC_VERSION_HEADER, checkApiVersionHeader, checkWebrtcVersionHeader } from '../../protocol/versions.ts';

export const checkApiVersion: MiddlewareHandler = async (c, next) => {
  checkApiVersionHeader(c.req.header(API_VERSION_HEADER));
  await next();
};

export const checkWebrtcVersion: MiddlewareHandler = async (c, next) => {
  checkWebrtcVersionHeader(c.req.header(WEBRTC_VERSION_HEADER));
  await next();
};
