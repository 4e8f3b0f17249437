/**
 * `arclight/client/node` — the client for Node, with WebRTC from @roamhq/wrtc.
 *
 * Note: wrtc's native threads keep a process alive (and may crash it during Node's normal
 * exit) after peers close: end Node apps with `process.exit()` once the client disconnected.
 */

import wrtc from '@roamhq/wrtc';
import { ArclightClient as BaseClient, type ArclightClientOptions } from './arclight-client.ts';
import type { ModelTypes, UntypedModel } from './model-types.ts';
import type { RtcImplementation } from './peer-link.ts';

export * from './index.ts';

/** @roamhq/wrtc's RTCPeerConnection and friends, plus its nonstandard frame sources/sinks. */
export const nodeWebRtc: RtcImplementation = {
  RTCPeerConnection: wrtc.RTCPeerConnection as unknown as typeof RTCPeerConnection,
  MediaStream: wrtc.MediaStream as unknown as typeof MediaStream,
};
export { wrtc };

/** `Model`: optional model types (see `arclight types`); untyped by default. */
export class ArclightClient<Model extends ModelTypes = UntypedModel> extends BaseClient<Model> {
  constructor(options: ArclightClientOptions) {
    super({ rtc: nodeWebRtc, ...options });
  }
}
