/**
 * The client's media transport: one peer link to the runtime at a time, opened on a session and
 * a connection id and closed again, with what lives exactly as long as that link — the trickle of
 * late candidates, the keepalive ping, the requests in flight on its data channel (CommandChannel)
 * and the wait for the runtime's confirmation. SessionConnection decides when to open and close
 * it; this file knows how (the order of the calls below is the connect path's latency budget).
 * What else must happen around a link (input transforms, paused outputs, stats, the features'
 * inbound messages) is asked of `TransportHooks`, which the facade wires to the parts.
 */

import type { Capabilities } from '../protocol/capabilities.ts';
import { ArclightError } from '../protocol/errors.ts';
import { CandidateTrickler } from './candidate-trickler.ts';
import type { EmitClientEvent } from './client-types.ts';
import { CommandChannel } from './command-channel.ts';
import { routeInbound, type InboundHandlers } from './inbound-messages.ts';
import { PeerLink, type LostReason, type RtcImplementation } from './peer-link.ts';
import type { SessionApi } from './session-api.ts';

const PING_INTERVAL_MS = 5_000;

export interface PeerTransportOptions {
  /** The WebRTC implementation; undefined: the global one (browsers), looked up at each open. */
  readonly rtc: RtcImplementation | undefined;
  readonly iceTransportPolicy: RTCIceTransportPolicy;
  readonly iceGatheringTimeoutMs: number | undefined;
  readonly connectTimeoutMs: number;
  readonly commandTimeoutMs: number;
}

/** What the parts around the transport do at its steps (the facade wires them). */
export interface TransportHooks extends Pick<InboundHandlers, 'frameMetadata' | 'frameTimes' | 'mediaStats' | 'modelReloaded'> {
  readonly emit: EmitClientEvent;
  /** A new peer, before its offer: encoded transforms apply only if set before the first negotiation. */
  installInputTransforms(tracks: Capabilities['tracks'], senderOf: (track: string) => RTCRtpSender): void;
  /** The output tracks the offer asks to start paused. */
  pausedTracks(tracks: Capabilities['tracks']): string[];
  /** Ready on both sides: start what runs while connected. */
  opened(): void;
  /** The peer is closed: stop what ran on it. */
  closed(): void;
}

/** What the transport tells the connection that owns it. */
export interface TransportOwner {
  connectionIdKnown(connectionId: number): void;
  /** The current link broke after being ready (called outside the peer's callbacks). */
  lost(reason: LostReason): void;
  sessionEnded(reason: string): void;
  fail(error: ArclightError): void;
}

export class PeerTransport {
  readonly #options: PeerTransportOptions;
  readonly #hooks: TransportHooks;
  readonly #owner: TransportOwner;
  readonly #inbound: InboundHandlers;
  readonly #commands: CommandChannel;
  #link: PeerLink | undefined;
  /** Sends the current link's late candidates. */
  #trickler: CandidateTrickler | undefined;
  /** Resolves the transport being opened once the runtime confirms its side is ready (connection_info). */
  #runtimeConfirmed: (() => void) | undefined;
  #pingTimer: ReturnType<typeof setInterval> | undefined;

  constructor(options: PeerTransportOptions, hooks: TransportHooks, owner: TransportOwner) {
    this.#options = options;
    this.#hooks = hooks;
    this.#owner = owner;
    this.#commands = new CommandChannel((text) => this.#link!.send(text), options.commandTimeoutMs);
    this.#inbound = {
      emit: hooks.emit,
      commands: this.#commands,
      fail: (error) => owner.fail(error),
      frameMetadata: (data) => hooks.frameMetadata(data),
      frameTimes: (track, frames) => hooks.frameTimes(track, frames),
      mediaStats: (quality) => hooks.mediaStats(quality),
      modelReloaded: (capabilities) => hooks.modelReloaded(capabilities),
      sessionEnded: (reason) => owner.sessionEnded(reason),
      connectionInfo: (connectionId) => {
        if (connectionId !== undefined) owner.connectionIdKnown(connectionId);
        this.#runtimeConfirmed?.();
        this.#runtimeConfirmed = undefined;
      },
    };
  }

  /** Requests on the current link's data channel. */
  get commands(): CommandChannel {
    return this.#commands;
  }

  get isOpen(): boolean {
    return this.#link !== undefined;
  }

  get peerConnection(): RTCPeerConnection | undefined {
    return this.#link?.pc;
  }

  /** The sender of an input track's transceiver on the current link. */
  sender(track: string): RTCRtpSender | undefined {
    return this.#link?.transceiver(track)?.sender;
  }

  /** Writes to the data channel; throws when there is no link or its channel is not open. */
  send(text: string): void {
    this.#link!.send(text);
  }

  /**
   * Opens a link on `connectionId` (or a newly registered one) and resolves once both sides are
   * ready; `renegotiate` offers it as a new peer of an existing connection (PUT sdp_params).
   */
  async open(
    api: SessionApi,
    sessionId: string,
    capabilities: Capabilities,
    connectionId: number | undefined,
    renegotiate: boolean,
    maxAttempts: number,
  ): Promise<void> {
    // Two independent calls: one round trip, not two.
    const [iceServers, id] = await Promise.all([
      api.iceServers(sessionId),
      connectionId ?? api.registerConnection(sessionId).then((registered) => registered.connection_id),
    ]);
    this.#owner.connectionIdKnown(id);
    const rtc = this.#options.rtc ?? globalRtc();
    const link = new PeerLink(
      rtc,
      iceServers,
      capabilities.tracks,
      {
        message: (raw) => routeInbound(raw, this.#inbound),
        track: (name, track, stream) => this.#hooks.emit('trackReceived', name, track, stream),
        lost: (reason) =>
          setTimeout(() => {
            if (this.#link === link) this.#owner.lost(reason);
          }, 0),
      },
      {
        iceTransportPolicy: this.#options.iceTransportPolicy,
        ...(this.#options.iceGatheringTimeoutMs !== undefined ? { gatherTimeoutMs: this.#options.iceGatheringTimeoutMs } : {}),
      },
    );
    this.#link = link;
    // Ready means ready on both sides. The client's channel opens (and its peer connects) before
    // the runtime has attached its end of the channel, and until it has, nothing the runtime sends
    // this connection arrives — a session ended in that moment told nobody why. The runtime's
    // connection_info, sent once its side is ready, closes that gap.
    const confirmed = new Promise<void>((resolve) => {
      this.#runtimeConfirmed = resolve;
    });
    // Encoded transforms only apply if set before the first negotiation: install them now, idle.
    this.#hooks.installInputTransforms(capabilities.tracks, (track) => link.transceiver(track)!.sender);
    const { sdp, mapping } = await link.createOffer();
    const pausedTracks = this.#hooks.pausedTracks(capabilities.tracks);
    const inlineAnswer = await api.sendOffer(
      sessionId,
      id,
      { sdp_offer: sdp, track_mapping: mapping, paused_tracks: pausedTracks },
      renegotiate,
    );
    // The runtime has the offer's peer now: candidates found since go to it.
    const offeredOn = id;
    const trickler = new CandidateTrickler(
      (request) => api.sendIceCandidates(sessionId, offeredOn, request),
      (error) => this.#owner.fail(error),
    );
    this.#trickler = trickler;
    link.trickleTo((candidate) => trickler.push(candidate));
    // Usually the offer's own reply carries the answer; otherwise it is polled for.
    const answer = inlineAnswer ?? (await api.pollAnswer(sessionId, id, maxAttempts));
    await link.acceptAnswer(answer);
    const connectTimeoutMs = this.#options.connectTimeoutMs;
    const connectStarted = performance.now();
    await link.waitReady(connectTimeoutMs);
    await withDeadline(
      confirmed,
      Math.max(0, connectTimeoutMs - (performance.now() - connectStarted)),
      () => new ArclightError('timeout', `Not connected after ${connectTimeoutMs} ms: the runtime did not confirm the connection.`),
    );
    this.#hooks.opened();
    this.#startKeepalive();
  }

  /** Closes the link and fails what waited on it; the session is untouched. */
  close(): void {
    this.#stopKeepalive();
    this.#trickler?.stop();
    this.#trickler = undefined;
    const link = this.#link;
    this.#link = undefined;
    try {
      link?.close();
    } catch (error) {
      console.warn('[arclight] closing the peer connection failed', error);
    }
    this.#hooks.closed();
    this.#commands.rejectAll(new ArclightError('connection_failed', 'The connection closed before the command completed.'));
  }

  #startKeepalive(): void {
    this.#stopKeepalive();
    this.#pingTimer = setInterval(() => {
      try {
        this.#link?.send(JSON.stringify({ scope: 'runtime', data: { type: 'ping', data: {} } }));
      } catch {
        // channel closing; the lost handler takes over
      }
    }, PING_INTERVAL_MS);
  }

  #stopKeepalive(): void {
    clearInterval(this.#pingTimer);
    this.#pingTimer = undefined;
  }
}

function globalRtc(): RtcImplementation {
  const g = globalThis as { RTCPeerConnection?: typeof RTCPeerConnection; MediaStream?: typeof MediaStream };
  if (!g.RTCPeerConnection) {
    throw new ArclightError(
      'invalid_request',
      'No RTCPeerConnection here. In Node, import { ArclightClient } from "arclight/client/node" (it uses @roamhq/wrtc).',
    );
  }
  return { RTCPeerConnection: g.RTCPeerConnection, ...(g.MediaStream ? { MediaStream: g.MediaStream } : {}) };
}

/** `promise`, or the error `timedOut()` makes once `ms` have passed. */
function withDeadline<T>(promise: Promise<T>, ms: number, timedOut: () => Error): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(timedOut()), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}
