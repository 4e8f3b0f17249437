/**
 * One WebRTC peer connection to the runtime: a transceiver per model track (in capability
 * order, as 2.9.0 lays them out), the `data` channel, and the wait for "ready" (peer connected
 * AND data channel open). No trickle ICE: the offer carries every candidate.
 */

import { ArclightError } from '../protocol/errors.ts';
import type { TrackCapability } from '../protocol/capabilities.ts';
import { DATA_CHANNEL_LABEL } from '../protocol/messages.ts';
import type { TrackMappingEntry } from '../protocol/transport.ts';

/** The WebRTC implementation: the browser's globals, or @roamhq/wrtc in Node. */
export interface RtcImplementation {
  readonly RTCPeerConnection: typeof RTCPeerConnection;
  readonly MediaStream?: typeof MediaStream;
}

export interface PeerLinkEvents {
  message(raw: string): void;
  track(name: string, track: MediaStreamTrack, stream: MediaStream | undefined): void;
  /** The peer or its channel went away after being ready. */
  lost(): void;
}

const GATHER_TIMEOUT_MS = 5_000;

export class PeerLink {
  readonly pc: RTCPeerConnection;
  readonly channel: RTCDataChannel;
  readonly #transceivers = new Map<string, RTCRtpTransceiver>();
  readonly #tracks: readonly TrackCapability[];
  readonly #events: PeerLinkEvents;
  #ready = false;
  #closed = false;

  /** `iceTransportPolicy`: `relay` gathers TURN relay candidates only (default `all`). */
  constructor(
    rtc: RtcImplementation,
    iceServers: RTCIceServer[],
    tracks: readonly TrackCapability[],
    events: PeerLinkEvents,
    iceTransportPolicy: RTCIceTransportPolicy = 'all',
  ) {
    this.#tracks = tracks;
    this.#events = events;
    this.pc = new rtc.RTCPeerConnection({ iceServers, iceTransportPolicy });
    this.channel = this.pc.createDataChannel(DATA_CHANNEL_LABEL);
    for (const track of tracks) {
      this.#transceivers.set(track.name, this.pc.addTransceiver(track.kind, { direction: track.direction }));
    }
    this.pc.ontrack = (event) => {
      const name = [...this.#transceivers].find(([, t]) => t === event.transceiver)?.[0] ?? event.transceiver.mid ?? event.track.id;
      this.#events.track(name, event.track, event.streams[0]);
    };
    this.channel.onmessage = (event) => {
      if (typeof event.data === 'string') this.#events.message(event.data);
    };
    const onGone = () => {
      if (this.#ready && !this.#closed) {
        this.#ready = false;
        this.#events.lost();
      }
    };
    this.channel.onclose = onGone;
    this.pc.addEventListener('connectionstatechange', () => {
      const state = this.pc.connectionState;
      if (state === 'failed' || state === 'closed' || state === 'disconnected') onGone();
    });
  }

  transceiver(name: string): RTCRtpTransceiver | undefined {
    return this.#transceivers.get(name);
  }

  async createOffer(): Promise<{ sdp: string; mapping: TrackMappingEntry[] }> {
    await this.pc.setLocalDescription(await this.pc.createOffer());
    await this.#waitForGathering();
    const sdp = this.pc.localDescription?.sdp;
    if (!sdp) throw new ArclightError('connection_failed', 'The browser produced no SDP offer.');
    const mapping = this.#tracks.map((track) => {
      const mid = this.#transceivers.get(track.name)?.mid;
      if (mid == null) throw new ArclightError('connection_failed', `Transceiver for "${track.name}" has no mid after createOffer.`);
      return { mid, name: track.name, kind: track.kind, direction: track.direction };
    });
    return { sdp, mapping };
  }

  async acceptAnswer(sdp: string): Promise<void> {
    await this.pc.setRemoteDescription({ type: 'answer', sdp });
  }

  /** Resolves once the peer is connected and the data channel open. */
  waitReady(timeoutMs: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = () => {
        if (this.#closed) return finish(new ArclightError('connection_failed', 'The connection was closed while connecting.'));
        const state = this.pc.connectionState;
        if (state === 'failed') return finish(new ArclightError('connection_failed', 'ICE/DTLS failed: no network path to the runtime.'));
        if (state === 'connected' && this.channel.readyState === 'open') {
          this.#ready = true;
          finish();
        }
      };
      const timer = setTimeout(() => finish(new ArclightError('timeout', `Not connected after ${timeoutMs} ms.`)), timeoutMs);
      const poll = setInterval(check, 25);
      const finish = (error?: ArclightError) => {
        clearTimeout(timer);
        clearInterval(poll);
        if (error) reject(error);
        else resolve();
      };
      check();
    });
  }

  send(text: string): void {
    if (this.channel.readyState !== 'open') throw new ArclightError('not_ready', 'The data channel is not open.');
    this.channel.send(text);
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#ready = false;
    try {
      this.channel.close();
    } catch {
      // already closed
    }
    this.pc.close();
  }

  async #waitForGathering(): Promise<void> {
    if (this.pc.iceGatheringState === 'complete') return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, GATHER_TIMEOUT_MS);
      const poll = setInterval(() => this.pc.iceGatheringState === 'complete' && done(), 20);
      function done() {
        clearTimeout(timer);
        clearInterval(poll);
        resolve();
      }
    });
  }
}
