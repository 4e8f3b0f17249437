/**
 * The transport port: what a session's connection needs of one WebRTC peer — answer an offer
 * (fresh or in place), take trickled candidates, report its state, carry the data channel, drain
 * and close — with no WebRTC library's types in it. The werift adapter
 * (werift-peer-connection.ts) is the one implementation; runtime/session/ sees only this file and
 * media-transceiver.ts, so the session can be read (and one day tested) without werift.
 *
 * Shaped after the W3C `RTCPeerConnection` where it can be, but narrower: signalling is the
 * runtime's own (offer → complete answer, trickle in; see runtime/webrtc/), so there is no
 * createOffer, no local candidates and no transceivers to add.
 */

import type { TrackCapability } from '../../protocol/capabilities.ts';
import type { IceCandidateEntry, TrackMappingEntry } from '../../protocol/transport.ts';
import type { MediaStatsReporter, MediaStatsReporterOptions } from '../quality/media-stats-reporter.ts';
import type { MediaTransceiver } from './media-transceiver.ts';

/** A model track bound to the m-line (transceiver) of a peer that carries it. */
export interface MediaBinding {
  readonly transceiver: MediaTransceiver;
  readonly track: TrackCapability;
}

/** A client's offer to answer on a fresh peer. */
export interface FreshOffer {
  readonly offerSdp: string;
  readonly tracks: readonly TrackCapability[];
  readonly mapping: readonly TrackMappingEntry[] | undefined;
  /** Called once the offer is applied: from then on trickled candidates can go to the peer. */
  readonly onOfferApplied: () => void;
}

/** A renegotiation offer from the client peer the answering peer already serves (offer-origin.ts). */
export interface InPlaceOffer {
  readonly offerSdp: string;
  /** The offer the peer answered last (its m-lines must all be in `offerSdp`, in order). */
  readonly currentOfferSdp: string;
  /** The peer's track bindings now. */
  readonly current: readonly MediaBinding[];
  readonly tracks: readonly TrackCapability[];
  readonly mapping: readonly TrackMappingEntry[] | undefined;
  /** Called once the offer is applied: from then on trickled candidates go to the peer. */
  readonly onOfferApplied: () => void;
}

export interface InPlaceAnswer {
  readonly answerSdp: string;
  /** Every track binding of the peer once this offer is applied. */
  readonly bindings: readonly MediaBinding[];
  /** Bindings this offer adds (to attach). */
  readonly attached: readonly MediaBinding[];
  /** Bindings of the previous offer this one ends or changes (to detach, before attaching). */
  readonly detached: readonly MediaBinding[];
}

/** The client's data channel on a peer: JSON text both ways. */
export interface DataChannel {
  readonly label: string;
  readonly readyState: string;
  send(text: string): void;
  close(): void;
  onMessage(listener: (raw: string | Buffer) => void): void;
  onStateChange(listener: (state: string) => void): void;
}

/** What `media_stats` is measured from: a connection's output video senders, by track (see createMediaStats). */
export interface MeasuredVideoOutput {
  readonly track: string;
  readonly transceiver: MediaTransceiver;
}

export interface PeerConnection {
  /** `new`, `connecting`, `connected`, `disconnected`, `failed` or `closed`. */
  readonly connectionState: string;
  readonly iceConnectionState: string;
  onDataChannel(listener: (channel: DataChannel) => void): void;
  onConnectionStateChange(listener: (state: string) => void): void;
  onIceConnectionStateChange(listener: (state: string) => void): void;

  /** Answers an offer on this (fresh) peer: the complete answer and the m-line ↔ track bindings. */
  answerOffer(offer: FreshOffer): Promise<{ answerSdp: string; bindings: MediaBinding[] }>;
  /** Answers a renegotiation from the same client peer on this peer, kept m-lines untouched. */
  answerInPlace(offer: InPlaceOffer): Promise<InPlaceAnswer>;
  /** Adds checked trickled candidates (and the end-of-candidates mark) once the offer is applied. */
  addIceCandidates(candidates: readonly IceCandidateEntry[], endOfCandidates: boolean): Promise<void>;

  /** Once the peer is the connection's: data-channel retransmission timers and the test faults applied. */
  prepareInstalled(): void;
  /** Waits (at most `timeoutMs`) until every data-channel message sent so far is acknowledged. */
  drainDataChannel(timeoutMs: number): Promise<void>;
  /** Closes the peer so the client notices at once (its data channel first, when given). */
  close(channel?: DataChannel): Promise<void>;
  /** Tests only: every datagram the peer sends from now on is dropped, as in a network break. */
  simulateNetworkLoss(): void;

  /** The `media_stats` reporter for these output video senders of this peer. */
  createMediaStats(outputs: readonly MeasuredVideoOutput[], options: Omit<MediaStatsReporterOptions, 'senders'>): MediaStatsReporter;
}
