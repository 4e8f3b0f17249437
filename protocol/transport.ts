/**
 * WebRTC signalling bodies under `/sessions/{sid}/transport/webrtc`.
 *
 * Two shapes are served side by side:
 * - the 2.9.0 shape, one implicit connection per client: `POST|PUT|GET .../sdp_params`;
 * - the connection-addressed shape (runtime 3.2): `POST .../connections` mints a connection id,
 *   then `POST|PUT|GET .../connections/{cid}/sdp_params`.
 * No trickle ICE: offers and answers carry every candidate.
 */

import type { TrackDirection, TrackKind } from './capabilities.ts';
import type { ClientInfo } from './session.ts';

export interface IceServerEntry {
  readonly uris: readonly string[];
  readonly credentials?: { readonly username: string; readonly password: string };
}

export interface IceServersResponse {
  readonly ice_servers: readonly IceServerEntry[];
}

/** Which offered m-line (by mid) carries which model track. */
export interface TrackMappingEntry {
  readonly mid: string;
  readonly name: string;
  readonly kind: TrackKind;
  readonly direction: TrackDirection;
}

/** `POST|PUT .../sdp_params` body. PUT renegotiates (a reconnect) on the same connection. */
export interface SdpOfferRequest {
  readonly sdp_offer: string;
  readonly track_mapping?: readonly TrackMappingEntry[];
  readonly client_info?: ClientInfo;
  /** Arclight extension: track names whose output starts paused (autoResumeTracks=false). */
  readonly paused_tracks?: readonly string[];
}

/** 202 reply to an offer: negotiation runs; poll GET for the answer. */
export interface SdpOfferAccepted {
  readonly connection_id: number;
}

/** 200 reply of `GET .../sdp_params` once the answer is ready (202 with no body before). */
export interface SdpAnswerResponse {
  readonly sdp_answer: string;
  readonly connection_id: number;
}

/** 201 reply of `POST .../connections`. */
export interface RegisterConnectionResponse {
  readonly connection_id: number;
  /** The model's tracks by name, so a client can lay out transceivers before offering. */
  readonly track_map: Readonly<Record<string, { readonly kind: TrackKind; readonly direction: TrackDirection }>>;
}
