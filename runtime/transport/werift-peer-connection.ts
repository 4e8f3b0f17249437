/**
 * The werift implementation of the transport port (peer-connection.ts): one werift
 * `RTCPeerConnection`, made as the runtime makes its peers (signalling/peer-factory.ts), seen
 * as a `PeerConnection`. The signalling it answers with is in signalling/ (answer-offer.ts,
 * answer-in-place.ts, trickle-candidates.ts, sctp-tuning.ts); this file only carries werift's
 * objects across the port: transceivers become `WeriftMediaTransceiver`s (one per transceiver,
 * kept here, so bindings keep their identity across a renegotiation in place) and back.
 */

import type { RTCDataChannel, RTCPeerConnection, RTCRtpTransceiver } from 'werift';
import type { IceCandidateEntry } from '../../protocol/transport.ts';
import { MediaStatsReporter, type MediaStatsReporterOptions } from '../quality/media-stats-reporter.ts';
import { answerInPlace } from './signalling/answer-in-place.ts';
import { answerOffer, type TrackBinding } from './signalling/answer-offer.ts';
import { applyPeerFaults, blackholePeer, type PeerFaults } from '../faults/peer-faults.ts';
import { createRuntimePeer, type PeerFactoryOptions } from './signalling/peer-factory.ts';
import { closePeer, drainDataChannel, tuneSctpRetransmission } from './signalling/sctp-tuning.ts';
import { addTrickledCandidates } from './signalling/trickle-candidates.ts';
import { WeriftMediaTransceiver } from './werift-media-transceiver.ts';
import type { MediaTransceiver } from './media-transceiver.ts';
import type {
  DataChannel,
  FreshOffer,
  InPlaceAnswer,
  InPlaceOffer,
  MeasuredVideoOutput,
  MediaBinding,
  PeerConnection,
} from './peer-connection.ts';

/**
 * A runtime peer, made with the runtime's codecs, extensions and ICE policy, behind the port.
 * `faults` (tests only: startRuntimeWithFaults) are applied once the peer is installed.
 */
export function createWeriftPeerConnection(options: PeerFactoryOptions, faults?: PeerFaults): PeerConnection {
  return new WeriftPeerConnection(createRuntimePeer(options), options, faults);
}

/** werift's data channel behind the port's `DataChannel`; one per werift channel. */
class WeriftDataChannel implements DataChannel {
  readonly #channel: RTCDataChannel;

  constructor(channel: RTCDataChannel) {
    this.#channel = channel;
  }

  get label(): string {
    return this.#channel.label;
  }

  get readyState(): string {
    return this.#channel.readyState;
  }

  send(text: string): void {
    this.#channel.send(text);
  }

  close(): void {
    this.#channel.close();
  }

  onMessage(listener: (raw: string | Buffer) => void): void {
    this.#channel.onMessage.subscribe(listener);
  }

  onStateChange(listener: (state: string) => void): void {
    this.#channel.stateChanged.subscribe(listener);
  }
}

class WeriftPeerConnection implements PeerConnection {
  readonly #pc: RTCPeerConnection;
  readonly #options: PeerFactoryOptions;
  readonly #faults: PeerFaults | undefined;
  readonly #transceivers = new Map<RTCRtpTransceiver, WeriftMediaTransceiver>();
  readonly #channels = new Map<RTCDataChannel, WeriftDataChannel>();

  constructor(pc: RTCPeerConnection, options: PeerFactoryOptions, faults: PeerFaults | undefined) {
    this.#pc = pc;
    this.#options = options;
    this.#faults = faults;
  }

  get connectionState(): string {
    return this.#pc.connectionState;
  }

  get iceConnectionState(): string {
    return this.#pc.iceConnectionState;
  }

  onDataChannel(listener: (channel: DataChannel) => void): void {
    this.#pc.onDataChannel.subscribe((channel) => listener(this.#channel(channel)));
  }

  onConnectionStateChange(listener: (state: string) => void): void {
    this.#pc.connectionStateChange.subscribe(listener);
  }

  onIceConnectionStateChange(listener: (state: string) => void): void {
    this.#pc.iceConnectionStateChange.subscribe(listener);
  }

  async answerOffer(offer: FreshOffer): Promise<{ answerSdp: string; bindings: MediaBinding[] }> {
    const { answerSdp, bindings } = await answerOffer(
      this.#pc,
      offer.offerSdp,
      offer.tracks,
      offer.mapping,
      this.#options.icePolicy,
      this.#options.videoCodecs,
      offer.onOfferApplied,
    );
    return { answerSdp, bindings: bindings.map((b) => this.#toPort(b)) };
  }

  async answerInPlace(offer: InPlaceOffer): Promise<InPlaceAnswer> {
    const result = await answerInPlace(this.#pc, {
      offerSdp: offer.offerSdp,
      currentOfferSdp: offer.currentOfferSdp,
      current: offer.current.map((b) => ({ transceiver: this.#werift(b.transceiver), track: b.track })),
      tracks: offer.tracks,
      mapping: offer.mapping,
      peerOptions: this.#options,
      onOfferApplied: offer.onOfferApplied,
    });
    return {
      answerSdp: result.answerSdp,
      bindings: result.bindings.map((b) => this.#toPort(b)),
      attached: result.attached.map((b) => this.#toPort(b)),
      detached: result.detached.map((b) => this.#toPort(b)),
    };
  }

  addIceCandidates(candidates: readonly IceCandidateEntry[], endOfCandidates: boolean): Promise<void> {
    return addTrickledCandidates(this.#pc, candidates, endOfCandidates);
  }

  prepareInstalled(): void {
    tuneSctpRetransmission(this.#pc);
    applyPeerFaults(this.#pc, this.#faults);
  }

  drainDataChannel(timeoutMs: number): Promise<void> {
    return drainDataChannel(this.#pc, timeoutMs);
  }

  close(channel?: DataChannel): Promise<void> {
    return closePeer(this.#pc, channel);
  }

  simulateNetworkLoss(): void {
    blackholePeer(this.#pc);
  }

  createMediaStats(outputs: readonly MeasuredVideoOutput[], options: Omit<MediaStatsReporterOptions, 'senders'>): MediaStatsReporter {
    const senders = outputs.map(({ track, transceiver }) => ({ track, sender: this.#werift(transceiver).sender }));
    return new MediaStatsReporter({ senders, ...options });
  }

  #toPort(binding: TrackBinding): MediaBinding {
    let transceiver = this.#transceivers.get(binding.transceiver);
    if (!transceiver) this.#transceivers.set(binding.transceiver, (transceiver = new WeriftMediaTransceiver(binding.transceiver)));
    return { transceiver, track: binding.track };
  }

  #werift(transceiver: MediaTransceiver): RTCRtpTransceiver {
    if (!(transceiver instanceof WeriftMediaTransceiver))
      throw new TypeError('A werift peer was given a transceiver of another transport.');
    return transceiver.werift;
  }

  #channel(channel: RTCDataChannel): WeriftDataChannel {
    let wrapped = this.#channels.get(channel);
    if (!wrapped) this.#channels.set(channel, (wrapped = new WeriftDataChannel(channel)));
    return wrapped;
  }
}
