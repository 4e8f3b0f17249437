/**
 * One client connection of a session: its werift peer, its data channel, and where its media
 * goes. A connection id outlives a peer: after a recoverable drop the client may renegotiate
 * (PUT sdp_params) on the same id; `close()` retires the id for good.
 */

import type { RTCDataChannel, RTCPeerConnection, RTCRtpTransceiver } from 'werift';
import { ArclightError } from '../../protocol/errors.ts';
import type { JsonValue } from '../../protocol/json-schema.ts';
import type { Envelope, EnvelopeBody, MessageScope } from '../../protocol/messages.ts';
import { DATA_CHANNEL_LABEL } from '../../protocol/messages.ts';
import type { SdpOfferRequest } from '../../protocol/transport.ts';
import type { Logger } from '../log.ts';
import type { ConnectionHandle } from '../model/model-session.ts';
import { answerOffer, type TrackBinding } from '../webrtc/answer-offer.ts';
import { createRuntimePeer, type PeerFactoryOptions } from '../webrtc/peer-factory.ts';
import { RtpTrackSender } from '../webrtc/rtp-track-sender.ts';
import { closePeer, drainDataChannel, tuneSctpRetransmission } from '../webrtc/sctp-tuning.ts';
import type { TrackCapability } from '../../protocol/capabilities.ts';

export type ConnectionState =
  /** Id minted, no offer yet. */
  | 'registered'
  /** An offer is being answered or the peer is connecting. */
  | 'negotiating'
  /** Peer connected and data channel open. */
  | 'ready'
  /** The peer went away; the id may be renegotiated. */
  | 'disconnected'
  /** Retired for good. */
  | 'closed';

/** What the session does with a connection's life events and media bindings. */
export interface ConnectionOwner {
  readonly tracks: readonly TrackCapability[];
  readonly peerOptions: PeerFactoryOptions;
  readonly log: Logger;
  connectionReady(connection: Connection): void;
  connectionLost(connection: Connection): void;
  messageReceived(connection: Connection, raw: string | Buffer): void;
  /** Attach output sinks and input receivers for a freshly negotiated peer. */
  bindMedia(connection: Connection, bindings: readonly TrackBinding[], pausedTracks: ReadonlySet<string>): void;
  /** Detach everything `bindMedia` attached for this connection. */
  unbindMedia(connection: Connection): void;
}

export type AnswerStatus =
  | { readonly state: 'pending' }
  | { readonly state: 'ready'; readonly sdp: string }
  | { readonly state: 'failed'; readonly error: ArclightError }
  | { readonly state: 'none' };

export class Connection {
  readonly id: number;
  readonly handle: ConnectionHandle;
  #state: ConnectionState = 'registered';
  readonly #owner: ConnectionOwner;
  readonly #log: Logger;
  #pc: RTCPeerConnection | undefined;
  #channel: RTCDataChannel | undefined;
  #answer: AnswerStatus = { state: 'none' };
  #peerConnected = false;
  #channelOpen = false;
  /** Bumped per negotiation so events from a replaced peer are ignored. */
  #generation = 0;
  #offerReceivedAt = 0;
  /** performance.now() at which the connection last became ready. */
  readyAt = 0;

  constructor(id: number, owner: ConnectionOwner) {
    this.id = id;
    this.#owner = owner;
    this.#log = owner.log.child({ connection: id });
    this.handle = Object.freeze({
      id,
      send: (type: string, data?: JsonValue) => this.sendMessage('application', { type, ...(data === undefined ? {} : { data }) }),
    });
  }

  get state(): ConnectionState {
    return this.#state;
  }

  get answer(): AnswerStatus {
    return this.#answer;
  }

  /** Time from the offer to ready, for metrics. */
  get connectSeconds(): number {
    return (this.readyAt - this.#offerReceivedAt) / 1000;
  }

  /**
   * Starts answering an offer; resolves when the answer is ready for `GET sdp_params`.
   * A renegotiation (reconnect) replaces the previous peer.
   */
  async negotiate(offer: SdpOfferRequest): Promise<void> {
    if (this.#state === 'closed') throw new ArclightError('connection_closed', `Connection ${this.id} is closed.`);
    const wasReady = this.#state === 'ready';
    this.#teardownPeer();
    // A renegotiation of a live connection ends that client's previous life: keep hooks paired.
    if (wasReady) this.#owner.connectionLost(this);
    const generation = ++this.#generation;
    this.#state = 'negotiating';
    this.#offerReceivedAt = performance.now();
    this.#answer = { state: 'pending' };
    const pc = createRuntimePeer(this.#owner.peerOptions);
    this.#pc = pc;
    pc.onDataChannel.subscribe((channel) => this.#attachChannel(channel, generation));
    pc.connectionStateChange.subscribe((state) => this.#peerStateChanged(state, generation));
    try {
      const { answerSdp, bindings } = await answerOffer(pc, offer.sdp_offer, this.#owner.tracks, offer.track_mapping, this.#owner.peerOptions.icePolicy);
      if (generation !== this.#generation) return;
      tuneSctpRetransmission(pc);
      this.#owner.bindMedia(this, bindings, new Set(offer.paused_tracks ?? []));
      this.#answer = { state: 'ready', sdp: answerSdp };
    } catch (error) {
      if (generation !== this.#generation) return;
      const failure = error instanceof ArclightError ? error : new ArclightError('internal_error', 'Negotiation failed.', { cause: error });
      if (failure.code === 'internal_error') this.#log.error('negotiation failed', { error });
      this.#answer = { state: 'failed', error: failure };
      this.#teardownPeer();
      this.#state = 'disconnected';
      throw failure;
    }
  }

  /** A sender for an output track bound on the current peer. */
  createTrackSender(transceiver: RTCRtpTransceiver): RtpTrackSender {
    return new RtpTrackSender(transceiver);
  }

  sendMessage(scope: MessageScope, body: EnvelopeBody): void {
    const channel = this.#channel;
    if (!channel || channel.readyState !== 'open') return;
    const message: Envelope = { scope, data: body };
    try {
      channel.send(JSON.stringify(message));
    } catch (error) {
      this.#log.warn('data channel send failed', { error });
    }
  }

  /** Waits (at most `timeoutMs`) until the client has acknowledged every message sent to it. */
  async drain(timeoutMs: number): Promise<void> {
    if (this.#pc) await drainDataChannel(this.#pc, timeoutMs);
  }

  /** Retires the connection: its peer closes and its id can no longer be negotiated. */
  close(): void {
    if (this.#state === 'closed') return;
    const wasLive = this.#state === 'ready';
    this.#teardownPeer();
    this.#state = 'closed';
    if (wasLive) this.#owner.connectionLost(this);
  }

  /** Closes the peer without firing lifecycle events (the session is ending). */
  closeSilently(): void {
    this.#teardownPeer();
    this.#state = 'closed';
  }

  #attachChannel(channel: RTCDataChannel, generation: number): void {
    if (generation !== this.#generation) return;
    if (channel.label !== DATA_CHANNEL_LABEL) {
      this.#log.warn('ignoring data channel with unexpected label', { label: channel.label });
      return;
    }
    this.#channel = channel;
    channel.onMessage.subscribe((raw) => {
      if (generation === this.#generation) this.#owner.messageReceived(this, raw);
    });
    channel.stateChanged.subscribe((state) => {
      if (generation !== this.#generation) return;
      if (state === 'open') {
        this.#channelOpen = true;
        this.#checkReady();
      } else if (state === 'closed') {
        this.#channelOpen = false;
        this.#lost();
      }
    });
    if (channel.readyState === 'open') {
      this.#channelOpen = true;
      this.#checkReady();
    }
  }

  #peerStateChanged(state: string, generation: number): void {
    if (generation !== this.#generation) return;
    if (state === 'connected') {
      this.#peerConnected = true;
      this.#checkReady();
    } else if (state === 'disconnected' || state === 'failed' || state === 'closed') {
      this.#peerConnected = false;
      this.#lost();
    }
  }

  #checkReady(): void {
    if (this.#state !== 'negotiating' || !this.#peerConnected || !this.#channelOpen) return;
    this.#state = 'ready';
    this.readyAt = performance.now();
    this.#owner.connectionReady(this);
  }

  #lost(): void {
    if (this.#state !== 'ready' && this.#state !== 'negotiating') return;
    const wasReady = this.#state === 'ready';
    this.#teardownPeer();
    this.#state = 'disconnected';
    if (wasReady) this.#owner.connectionLost(this);
  }

  #teardownPeer(): void {
    this.#generation++;
    this.#owner.unbindMedia(this);
    const pc = this.#pc;
    const channel = this.#channel;
    this.#pc = undefined;
    this.#channel = undefined;
    this.#peerConnected = false;
    this.#channelOpen = false;
    if (pc) closePeer(pc, channel).catch(() => {});
  }
}
