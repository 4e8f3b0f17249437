/**
 * One client connection of a session: its peer, its data channel, and where its media goes. A
 * connection id outlives a peer: after a recoverable drop the client may renegotiate (PUT
 * sdp_params) on the same id; `close()` retires the id for good.
 *
 * The peer is reached through the transport port (runtime/transport/peer-connection.ts), not
 * werift itself: which peer offers are answered on, and when a peer is the connection's, is
 * decided here; how a peer answers is the transport's.
 *
 * Longer than ~400 lines: it is one state machine (offer → answer → installed → ready → lost or
 * closed, with renegotiation in place and peer generations guarding every event), which is
 * easier to check whole than spread over files.
 */

import { ArclightError } from '../../protocol/errors.ts';
import type { JsonValue } from '../../protocol/json-schema.ts';
import type { Envelope, EnvelopeBody, MessageScope } from '../../protocol/messages.ts';
import { DATA_CHANNEL_LABEL, PEER_CLOSED_MESSAGE } from '../../protocol/messages.ts';
import type { IceCandidatesRequest, SdpOfferRequest } from '../../protocol/transport.ts';
import type { Logger } from '../../server-kit/log.ts';
import type { ConnectionHandle } from '../model/model-session.ts';
import { offerOrigin } from '../transport/signalling/offer-origin.ts';
import { FrameTimesReporter } from './frame-times.ts';
import { ConnectTimings } from './connect-timings.ts';
import type { MediaStatsReporter, OutputTrackCounters } from '../quality/media-stats-reporter.ts';
import {
  assertTrickledCandidate,
  isStaleCandidate,
  offerIceSections,
  type OfferIceSections,
} from '../transport/signalling/trickle-candidates.ts';
import type { TrackCapability } from '../../protocol/capabilities.ts';
import type { DataChannel, MediaBinding, PeerConnection } from '../transport/peer-connection.ts';
import type { MediaSender, MediaSenderOptions, MediaTransceiver } from '../transport/media-transceiver.ts';

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
  readonly log: Logger;
  /** A fresh peer for an offer, made as the runtime makes its peers. */
  createPeer(): PeerConnection;
  connectionReady(connection: Connection): void;
  connectionLost(connection: Connection): void;
  messageReceived(connection: Connection, raw: string | Buffer): void;
  /** Attach output sinks and input receivers for these bindings (a fresh peer's, or those a renegotiation in place adds). */
  bindMedia(connection: Connection, bindings: readonly MediaBinding[], pausedTracks: ReadonlySet<string>): void;
  /** Detach what `bindMedia` attached for this connection: for the named tracks only, or everything. */
  unbindMedia(connection: Connection, trackNames?: readonly string[]): void;
  /** The model's output video track (for `media_stats`: frames the model emitted, frames the track dropped). */
  outputVideoTrack?(name: string): OutputTrackCounters | undefined;
  /** The model as sessions see it (for `media_stats`: the declared fps). */
  readonly model?: { readonly fps?: number };
  /** The model sent an application message of this type itself (`connection.send`): undeclared types are warned about once. */
  modelMessageSent?(type: string): void;
}

export type AnswerStatus =
  | { readonly state: 'pending' }
  | { readonly state: 'ready'; readonly sdp: string }
  | { readonly state: 'failed'; readonly error: ArclightError }
  | { readonly state: 'none' };

/** The peer answering the newest offer, and what trickled candidates are checked against. */
interface OfferTarget {
  readonly pc: PeerConnection;
  readonly sections: OfferIceSections;
  /** Resolves true once the offer is applied to `pc`, false if it never will be. */
  readonly applied: Promise<boolean>;
}

/** A target for `offerSdp` on `pc`, and the call that settles its `applied` (true once the peer has applied the offer). */
function offerTarget(pc: PeerConnection, offerSdp: string): { target: OfferTarget; offerApplied: (applied: boolean) => void } {
  let offerApplied: (applied: boolean) => void = () => {};
  const applied = new Promise<boolean>((resolve) => (offerApplied = resolve));
  return { target: { pc, sections: offerIceSections(offerSdp), applied }, offerApplied };
}

export class Connection {
  readonly id: number;
  readonly handle: ConnectionHandle;
  #state: ConnectionState = 'registered';
  readonly #owner: ConnectionOwner;
  readonly #log: Logger;
  #pc: PeerConnection | undefined;
  #channel: DataChannel | undefined;
  /** The peer generation `#channel` belongs to: one channel per peer is served. */
  #channelGeneration = -1;
  #answer: AnswerStatus = { state: 'none' };
  #peerConnected = false;
  #channelOpen = false;
  /** Bumped per installed peer so events from a replaced peer are ignored. */
  #generation = 0;
  /** Bumped per offer: only the newest offer's peer is installed. */
  #negotiation = 0;
  /** The newest offer's peer (answering, or installed), where trickled candidates go. */
  #offer: OfferTarget | undefined;
  #offerReceivedAt = 0;
  /** Output video tracks of the current peer: transceiver → track name, for frame counting. */
  #videoOutputs = new Map<MediaTransceiver, string>();
  /** The current peer's track bindings, and the offer it last answered (a renegotiation in place starts from both). */
  #bindings: readonly MediaBinding[] = [];
  #answeredOffer: string | undefined;
  /** A renegotiation in place still running: the next one waits for it (one description at a time on a peer). */
  #inPlace: Promise<unknown> = Promise.resolve();
  /** Output tracks this client has paused (from the offer, then `track_subscription`). */
  readonly #pausedTracks = new Set<string>();
  #mediaStats: MediaStatsReporter | undefined;
  /** Emit times of frames sent to this client, for its latency measurement (on request). */
  readonly frameTimes = new FrameTimesReporter((body) => this.sendMessage('runtime', body));
  /** performance.now() at which the connection last became ready. */
  readyAt = 0;
  /** The current peer's connect steps (runtime side), from its offer on: see connect-timings.ts. */
  #timings: ConnectTimings | undefined;

  constructor(id: number, owner: ConnectionOwner) {
    this.id = id;
    this.#owner = owner;
    this.#log = owner.log.child({ connection: id });
    this.handle = Object.freeze({
      id,
      send: (type: string, data?: JsonValue) => {
        this.#owner.modelMessageSent?.(type);
        this.sendMessage('application', { type, ...(data === undefined ? {} : { data }) });
      },
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

  /** When each connect step of the current peer happened (for the session log's `connection ready`). */
  get connectSteps(): ReturnType<ConnectTimings['toFields']> | undefined {
    return this.#timings?.toFields();
  }

  /**
   * Starts answering an offer; resolves when the answer is ready for `GET sdp_params`.
   * A renegotiation (PUT) of a live connection from its current client peer (same DTLS
   * fingerprint and ICE credentials, see offer-origin.ts) is answered in place on the current
   * peer. Any other offer (a reconnect from a fresh client peer, an ICE restart, or any offer to
   * a connection that is not ready) gets a new peer, which replaces the previous one — but only
   * once it has answered. Either way an offer that cannot be applied fails alone and leaves a
   * live connection as it was.
   */
  async negotiate(offer: SdpOfferRequest): Promise<void> {
    if (this.#state === 'closed') throw new ArclightError('connection_closed', `Connection ${this.id} is closed.`);
    if (this.#state === 'ready' && this.#pc && offerOrigin(this.#answeredOffer, offer.sdp_offer) === 'same-peer') {
      return this.#renegotiateInPlace(this.#pc, offer);
    }
    const negotiation = ++this.#negotiation;
    const live = this.#state === 'ready';
    if (!live) {
      // Nothing to keep: an earlier peer (still connecting, or lost) goes now.
      this.#teardownPeer();
      this.#state = 'negotiating';
    }
    const receivedAt = performance.now();
    const timings = new ConnectTimings();
    const previousOffer = this.#offer;
    this.#answer = { state: 'pending' };
    const pc = this.#owner.createPeer();
    const { target, offerApplied } = offerTarget(pc, offer.sdp_offer);
    this.#offer = target;
    try {
      const { answerSdp, bindings } = await pc.answerOffer({
        offerSdp: offer.sdp_offer,
        tracks: this.#owner.tracks,
        mapping: offer.track_mapping,
        onOfferApplied: () => {
          timings.mark('offer_applied');
          offerApplied(true);
        },
      });
      timings.mark('answer_ready');
      // (re-read after the await: the connection may have closed meanwhile)
      if (negotiation !== this.#negotiation || (this.#state as ConnectionState) === 'closed') {
        pc.close().catch(() => {});
        return;
      }
      this.#install(pc, bindings, offer, receivedAt, timings);
      this.#answer = { state: 'ready', sdp: answerSdp };
    } catch (error) {
      offerApplied(false);
      pc.close().catch(() => {});
      if (this.#offer === target) this.#offer = live && this.#state === 'ready' ? previousOffer : undefined;
      if (negotiation !== this.#negotiation) return;
      const failure = error instanceof ArclightError ? error : new ArclightError('internal_error', 'Negotiation failed.', { cause: error });
      if (failure.code === 'internal_error') this.#log.error('negotiation failed', { error });
      this.#answer = { state: 'failed', error: failure };
      // A live connection keeps its peer; one that was only connecting has nothing left.
      if (this.#state === 'negotiating') this.#state = 'disconnected';
      throw failure;
    }
  }

  /**
   * Answers an offer from the current client peer on the current runtime peer: kept transceivers
   * go on as they are, media is attached for the m-lines the offer adds and detached for those
   * it ends. A refused offer leaves the peer and its media as they were (answer-in-place.ts
   * checks before it applies); only the answer status reports the failure.
   */
  async #renegotiateInPlace(pc: PeerConnection, offer: SdpOfferRequest): Promise<void> {
    const negotiation = ++this.#negotiation;
    const previousOffer = this.#offer;
    this.#answer = { state: 'pending' };
    const { target, offerApplied } = offerTarget(pc, offer.sdp_offer);
    this.#offer = target;
    const superseded = () => negotiation !== this.#negotiation || this.#pc !== pc || this.#state === 'closed';
    const run = this.#inPlace.then(async () => {
      if (superseded()) return undefined;
      return pc.answerInPlace({
        offerSdp: offer.sdp_offer,
        currentOfferSdp: this.#answeredOffer ?? '',
        current: this.#bindings,
        tracks: this.#owner.tracks,
        mapping: offer.track_mapping,
        onOfferApplied: () => offerApplied(true),
      });
    });
    this.#inPlace = run.catch(() => {});
    try {
      const result = await run;
      // Applied to a peer that is still the connection's: its media follows, even if a newer
      // offer is already waiting (that one starts from these bindings).
      if (!result || this.#pc !== pc || this.#state === 'closed') {
        offerApplied(false);
        return;
      }
      this.#answeredOffer = offer.sdp_offer;
      this.#bindings = result.bindings;
      this.#owner.unbindMedia(
        this,
        result.detached.map((b) => b.track.name),
      );
      for (const { transceiver } of result.detached) this.#videoOutputs.delete(transceiver);
      for (const { transceiver, track } of result.attached) {
        if (track.kind === 'video' && track.direction === 'recvonly') this.#videoOutputs.set(transceiver, track.name);
      }
      const paused = new Set(offer.paused_tracks ?? []);
      for (const { track } of result.attached) {
        if (paused.has(track.name)) this.#pausedTracks.add(track.name);
        else this.#pausedTracks.delete(track.name);
      }
      this.#owner.bindMedia(this, result.attached, paused);
      if (result.attached.length > 0 || result.detached.length > 0) this.#startMediaStats();
      this.#log.info('renegotiated in place', {
        attached: result.attached.map((b) => b.track.name),
        detached: result.detached.map((b) => b.track.name),
      });
      if (negotiation === this.#negotiation) this.#answer = { state: 'ready', sdp: result.answerSdp };
    } catch (error) {
      offerApplied(false);
      if (this.#offer === target) this.#offer = previousOffer;
      if (negotiation !== this.#negotiation) return;
      const failure = error instanceof ArclightError ? error : new ArclightError('internal_error', 'Negotiation failed.', { cause: error });
      if (failure.code === 'internal_error') this.#log.error('renegotiation in place failed', { error });
      this.#answer = { state: 'failed', error: failure };
      throw failure;
    }
  }

  /**
   * Trickled candidates for the newest offer's peer (after the offer is applied; the peer then
   * pairs and checks them at once). Resolves with how many were added (stale ones are not).
   */
  async addIceCandidates(request: IceCandidatesRequest): Promise<number> {
    if (this.#state === 'closed') throw new ArclightError('connection_closed', `Connection ${this.id} is closed.`);
    const target = this.#offer;
    if (!target) {
      throw new ArclightError(
        'not_ready',
        `Connection ${this.id} has no offer being answered; POST one to sdp_params, then trickle its candidates.`,
      );
    }
    request.candidates.forEach((entry, index) => assertTrickledCandidate(entry, index, target.sections));
    const fresh = request.candidates.filter((entry) => !isStaleCandidate(entry, target.sections));
    if (!(await target.applied) || target.pc.connectionState === 'closed') {
      throw new ArclightError('not_ready', `The offer of connection ${this.id} these candidates belong to is gone; send a new offer.`);
    }
    await target.pc.addIceCandidates(fresh, request.end_of_candidates === true);
    return fresh.length;
  }

  /** Makes a peer that has answered the connection's peer, retiring the one before it. */
  #install(
    pc: PeerConnection,
    bindings: readonly MediaBinding[],
    offer: SdpOfferRequest,
    receivedAt: number,
    timings: ConnectTimings,
  ): void {
    const wasReady = this.#state === 'ready';
    if (wasReady) this.#tellPeerClosed();
    this.#teardownPeer();
    // A renegotiation of a live connection ends that client's previous life: keep hooks paired.
    if (wasReady) this.#owner.connectionLost(this);
    this.#state = 'negotiating';
    this.#offerReceivedAt = receivedAt;
    this.#timings = timings;
    const generation = ++this.#generation;
    this.#pc = pc;
    this.#bindings = bindings;
    this.#answeredOffer = offer.sdp_offer;
    // Subscribed only now: the client cannot finish DTLS (so no channel, no "connected") before
    // it has the answer, which is released after this.
    pc.onDataChannel((channel) => this.#attachChannel(channel, generation));
    pc.onConnectionStateChange((state) => this.#peerStateChanged(state, generation));
    const iceConnected = () => {
      if (generation !== this.#generation) return;
      timings.mark('ice_connected');
    };
    if (pc.iceConnectionState === 'connected') iceConnected();
    else pc.onIceConnectionStateChange((state) => state === 'connected' && iceConnected());
    pc.prepareInstalled();
    this.#videoOutputs = new Map(
      bindings.filter((b) => b.track.kind === 'video' && b.track.direction === 'recvonly').map((b) => [b.transceiver, b.track.name]),
    );
    this.#pausedTracks.clear();
    for (const name of offer.paused_tracks ?? []) this.#pausedTracks.add(name);
    this.#owner.bindMedia(this, bindings, new Set(offer.paused_tracks ?? []));
    if (pc.connectionState === 'connected') this.#peerStateChanged('connected', generation);
  }

  /**
   * A sender for an output track bound on the current peer. Frames sent through it are counted
   * for `media_stats` (the session needs to do nothing more): an output video track's sender
   * reports each frame (`onFrameSent`) while its peer is the connection's.
   */
  createTrackSender(transceiver: MediaTransceiver, options: MediaSenderOptions = {}): MediaSender {
    const track = this.#videoOutputs.get(transceiver);
    if (track === undefined) return transceiver.createSender(options);
    const generation = this.#generation;
    return transceiver.createSender({
      ...options,
      onFrameSent: () => {
        options.onFrameSent?.();
        if (generation === this.#generation) this.noteFrameSent(track);
      },
    });
  }

  /**
   * Counts one frame of an output video track sent to this client (for `media_stats`).
   * `createTrackSender` calls it for every frame; call it only for frames sent another way.
   */
  noteFrameSent(track: string): void {
    this.#mediaStats?.noteFrameSent(track);
  }

  /** What measures and sends this connection's `media_stats`, while it is ready and receives video. */
  get mediaStats(): MediaStatsReporter | undefined {
    return this.#mediaStats;
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
    if (this.#pc) await this.#pc.drainDataChannel(timeoutMs);
  }

  /** Retires the connection: its peer closes and its id can no longer be negotiated. */
  close(): void {
    if (this.#state === 'closed') return;
    const wasLive = this.#state === 'ready';
    if (wasLive) this.#tellPeerClosed();
    this.#dropPendingOffer();
    this.#teardownPeer();
    this.#state = 'closed';
    if (wasLive) this.#owner.connectionLost(this);
  }

  /**
   * Tells the client of a live peer that the runtime is closing it (another peer took the
   * connection over, or the connection was retired), just before it goes. Closing the data
   * channel tells a libwebrtc client too — but not while the runtime is the DTLS (and so SCTP)
   * server: werift leaves the client's half of the stream reset unanswered, its channel stays
   * `closing`, and it noticed only when ICE timed out, ~10 s later. Our client drops that peer on
   * this message (client/peer-link.ts); others ignore an unknown runtime message.
   */
  #tellPeerClosed(): void {
    this.sendMessage('runtime', { type: PEER_CLOSED_MESSAGE });
  }

  /**
   * Tests only: every datagram this connection's peer sends from now on is dropped, as in a
   * network break (see blackholePeer). A renegotiation (the client's reconnect) replaces the peer.
   */
  simulateNetworkLoss(): void {
    if (this.#pc) this.#pc.simulateNetworkLoss();
  }

  /** Closes the peer without firing lifecycle events (the session is ending). */
  closeSilently(): void {
    this.#dropPendingOffer();
    this.#teardownPeer();
    this.#state = 'closed';
  }

  #attachChannel(channel: DataChannel, generation: number): void {
    if (generation !== this.#generation) return;
    // The client's one channel, whatever its label: ours is "data" (2.9.0's too), but a client
    // that names it otherwise would otherwise connect and then hear nothing, silently. A second
    // channel on the same peer has no meaning in the protocol and is left alone.
    if (this.#channel !== undefined && this.#channel !== channel && this.#channelGeneration === generation) {
      this.#log.warn('ignoring a second data channel', { label: channel.label, serving: this.#channel.label });
      return;
    }
    if (channel.label !== DATA_CHANNEL_LABEL)
      this.#log.info('serving on a data channel labelled other than "data"', { label: channel.label });
    this.#channel = channel;
    this.#channelGeneration = generation;
    channel.onMessage((raw) => {
      if (generation !== this.#generation) return;
      this.#noteSubscription(raw);
      this.#owner.messageReceived(this, raw);
    });
    channel.onStateChange((state) => {
      if (generation !== this.#generation) return;
      if (state === 'open') {
        this.#channelOpen = true;
        this.#timings?.mark('channel_open');
        this.#checkReady();
      } else if (state === 'closed') {
        this.#channelOpen = false;
        this.#lost();
      }
    });
    if (channel.readyState === 'open') {
      this.#channelOpen = true;
      this.#timings?.mark('channel_open');
      this.#checkReady();
    }
  }

  #peerStateChanged(state: string, generation: number): void {
    if (generation !== this.#generation) return;
    if (state === 'connected') {
      this.#peerConnected = true;
      this.#timings?.mark('dtls_connected');
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
    this.#timings?.mark('ready');
    this.#startMediaStats();
    this.#owner.connectionReady(this);
  }

  #startMediaStats(): void {
    this.#mediaStats?.stop();
    this.#mediaStats = undefined;
    const outputs = [...this.#videoOutputs].map(([transceiver, track]) => ({ track, transceiver }));
    if (outputs.length === 0 || !this.#pc) return;
    const owner = this.#owner;
    this.#mediaStats = this.#pc.createMediaStats(outputs, {
      declaredFps: owner.model?.fps,
      trackCounters: (track) => owner.outputVideoTrack?.(track),
      pausedTracks: this.#pausedTracks,
      send: (data) => this.sendMessage('runtime', { type: 'media_stats', data: data as unknown as JsonValue }),
      log: this.#log,
    });
    this.#mediaStats.start();
  }

  /**
   * Follows this client's pause/resume requests for `media_stats` (a paused track is neither
   * slow nor frozen). Read here, beside the session's own handling, so the message handler
   * needs no hook; a request for a track this connection does not receive changes nothing.
   */
  #noteSubscription(raw: string | Buffer): void {
    if (this.#videoOutputs.size === 0 || raw.length > 4096) return;
    const text = typeof raw === 'string' ? raw : raw.toString('utf8');
    if (!text.includes('track_subscription')) return;
    try {
      const message = JSON.parse(text) as { scope?: unknown; data?: { type?: unknown; data?: { track?: unknown; subscribed?: unknown } } };
      const data = message?.data?.data;
      if (message?.scope !== 'runtime' || message.data?.type !== 'track_subscription') return;
      if (typeof data?.track !== 'string' || typeof data.subscribed !== 'boolean') return;
      if (![...this.#videoOutputs.values()].includes(data.track)) return;
      if (data.subscribed) this.#pausedTracks.delete(data.track);
      else this.#pausedTracks.add(data.track);
      this.#mediaStats?.setPaused(data.track, !data.subscribed);
    } catch {
      // not JSON: the message handler answers it
    }
  }

  #lost(): void {
    if (this.#state !== 'ready' && this.#state !== 'negotiating') return;
    const wasReady = this.#state === 'ready';
    this.#teardownPeer();
    this.#state = 'disconnected';
    if (wasReady) this.#owner.connectionLost(this);
  }

  /** Closes the peer of an offer still being answered (its negotiation then installs nothing). */
  #dropPendingOffer(): void {
    const pending = this.#offer;
    this.#offer = undefined;
    if (pending && pending.pc !== this.#pc) pending.pc.close().catch(() => {});
  }

  #teardownPeer(): void {
    this.#generation++;
    if (this.#offer?.pc === this.#pc) this.#offer = undefined;
    this.frameTimes.stop();
    this.#mediaStats?.stop();
    this.#mediaStats = undefined;
    this.#owner.unbindMedia(this);
    const pc = this.#pc;
    const channel = this.#channel;
    this.#pc = undefined;
    this.#bindings = [];
    this.#answeredOffer = undefined;
    this.#channel = undefined;
    this.#peerConnected = false;
    this.#channelOpen = false;
    if (pc) pc.close(channel).catch(() => {});
  }
}
