/**
 * WebRTC signalling bodies under `/sessions/{sid}/transport/webrtc`.
 *
 * Two shapes are served side by side:
 * - the 2.9.0 shape, one implicit connection per client: `POST|PUT|GET .../sdp_params`;
 * - the connection-addressed shape (runtime 3.2): `POST .../connections` mints a connection id,
 *   then `POST|PUT|GET .../connections/{cid}/sdp_params`.
 * Trickle ICE from the client only: `POST .../connections/{cid}/ice_candidates` adds candidates the
 * client gathered after its offer went out; the runtime's answer carries all of its own.
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

/**
 * 202 reply to an offer. Arclight extension: `sdp_answer` when the runtime answered within the
 * request (it usually does), so the client needs no GET; without it, poll GET for the answer.
 * (2.9.0 ignores the body of this 202.)
 */
export interface SdpOfferAccepted {
  readonly connection_id: number;
  readonly sdp_answer?: string;
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

/** One ICE candidate as the client's `RTCPeerConnection` reports it (`RTCIceCandidateInit`, snake_case). */
export interface IceCandidateEntry {
  /** The SDP attribute value without `a=`: `candidate:<foundation> <component> <udp|tcp> <priority> <address> <port> typ <type> …`. */
  readonly candidate: string;
  readonly sdp_mid?: string;
  readonly sdp_m_line_index?: number;
  /** The ICE ufrag the candidate belongs to; one from an earlier offer is ignored (stale after a restart). */
  readonly username_fragment?: string;
}

/** `POST .../connections/{cid}/ice_candidates` body: trickled candidates, and/or the end of them. */
export interface IceCandidatesRequest {
  readonly candidates: readonly IceCandidateEntry[];
  /** No more candidates will come for the current offer. */
  readonly end_of_candidates?: boolean;
}

/** 200 reply: how many candidates the connection's peer took (stale ones are not counted). */
export interface IceCandidatesAccepted {
  readonly connection_id: number;
  readonly added: number;
}
