/**
 * One WebRTC peer connection to the runtime: a transceiver per model track (in capability
 * order, as 2.9.0 lays them out), the `data` channel, and the wait for "ready" (peer connected
 * AND data channel open). The offer goes out as soon as the peer has found its first candidate
 * (or finished gathering, or after `gatherTimeoutMs`), with every candidate found by then; later
 * ones (and the end of them) go to `trickle` once the offer is sent. Waiting for gathering to
 * complete cost ~100 ms on every connect: libwebrtc finds its UDP host candidates within a few
 * milliseconds, then waits a fixed step (~100 ms) before its TCP ones, which are trickled now. A path that breaks
 * after "ready" is reported as `lost`: ICE `failed` at once, `disconnected` after a short grace
 * (it often heals by itself: a Wi-Fi hiccup, a NAT rebinding).
 */

import { ArclightError } from '../protocol/errors.ts';
import type { TrackCapability } from '../protocol/capabilities.ts';
import { DATA_CHANNEL_LABEL, PEER_CLOSED_MESSAGE } from '../protocol/messages.ts';
import type { IceCandidateEntry, TrackMappingEntry } from '../protocol/transport.ts';

/** The WebRTC implementation: the browser's globals, or @roamhq/wrtc in Node. */
export interface RtcImplementation {
  readonly RTCPeerConnection: typeof RTCPeerConnection;
  readonly MediaStream?: typeof MediaStream;
}

export interface PeerLinkEvents {
  message(raw: string): void;
  track(name: string, track: MediaStreamTrack, stream: MediaStream | undefined): void;
  /** The peer or its channel went away after being ready; `reason` says how, for logs and events. */
  lost(reason: LostReason): void;
}

/** How a ready link went away. */
export type LostReason = 'ice_failed' | 'ice_disconnected' | 'peer_closed' | 'channel_closed';

export interface PeerLinkOptions {
  /** `relay` gathers TURN relay candidates only (default `all`). */
  readonly iceTransportPolicy?: RTCIceTransportPolicy;
  /**
   * How long the offer waits for its first candidate (it goes as soon as one is found, or
   * gathering completes); later ones are trickled. 0: the offer carries none, all are trickled.
   * Default 5 s.
   */
  readonly gatherTimeoutMs?: number;
}

/** Where candidates found after the offer go; `undefined` = the end of them. */
export type CandidateSink = (candidate: IceCandidateEntry | undefined) => void;

const GATHER_TIMEOUT_MS = 5_000;
/** ICE `disconnected` this long after ready counts as lost (libwebrtc says `failed` only after ~30 s). */
export const DISCONNECTED_GRACE_MS = 2_000;

export class PeerLink {
  readonly pc: RTCPeerConnection;
  readonly channel: RTCDataChannel;
  readonly #transceivers = new Map<string, RTCRtpTransceiver>();
  readonly #tracks: readonly TrackCapability[];
  readonly #events: PeerLinkEvents;
  readonly #gatherTimeoutMs: number;
  #ready = false;
  #closed = false;
  /** Called when the link closes: pending waits (`waitReady`, the offer's first candidate) settle at once. */
  readonly #onClose = new Set<() => void>();
  #disconnectedTimer: ReturnType<typeof setTimeout> | undefined;
  /** Candidates found after the offer was taken, until a sink is attached (then straight to it). */
  #trickle: { taken: boolean; queued: (IceCandidateEntry | undefined)[]; sink: CandidateSink | undefined } = {
    taken: false,
    queued: [],
    sink: undefined,
  };
  /** The candidates the offer carries (`candidate:…`): their events, often still queued when it is read, are not trickled again. */
  #offered = new Set<string>();

  constructor(
    rtc: RtcImplementation,
    iceServers: RTCIceServer[],
    tracks: readonly TrackCapability[],
    events: PeerLinkEvents,
    options: PeerLinkOptions = {},
  ) {
    this.#tracks = tracks;
    this.#events = events;
    this.#gatherTimeoutMs = options.gatherTimeoutMs ?? GATHER_TIMEOUT_MS;
    this.pc = new rtc.RTCPeerConnection({ iceServers, iceTransportPolicy: options.iceTransportPolicy ?? 'all' });
    this.pc.onicecandidate = (event) => this.#candidateFound(event.candidate);
    this.channel = this.pc.createDataChannel(DATA_CHANNEL_LABEL);
    for (const track of tracks) {
      this.#transceivers.set(track.name, this.pc.addTransceiver(track.kind, { direction: track.direction }));
    }
    this.pc.ontrack = (event) => {
      const name = [...this.#transceivers].find(([, t]) => t === event.transceiver)?.[0] ?? event.transceiver.mid ?? event.track.id;
      this.#events.track(name, event.track, event.streams[0]);
    };
    this.channel.onmessage = (event) => {
      if (typeof event.data !== 'string') return;
      // This link's peer is being closed by the runtime: gone now, not when ICE times out.
      if (isPeerClosed(event.data)) return this.#gone('peer_closed');
      this.#events.message(event.data);
    };
    this.channel.onclose = () => this.#gone('channel_closed');
    // Both: libwebrtc builds differ in which of the two they report a broken path on first.
    this.pc.addEventListener('connectionstatechange', () => this.#pathChanged());
    this.pc.addEventListener('iceconnectionstatechange', () => this.#pathChanged());
  }

  #pathChanged(): void {
    const { connectionState, iceConnectionState } = this.pc;
    if (connectionState === 'closed') return this.#gone('peer_closed');
    if (connectionState === 'failed' || iceConnectionState === 'failed') return this.#gone('ice_failed');
    if (connectionState === 'disconnected' || iceConnectionState === 'disconnected') {
      this.#disconnectedTimer ??= setTimeout(() => {
        this.#disconnectedTimer = undefined;
        if (this.pc.connectionState === 'disconnected' || this.pc.iceConnectionState === 'disconnected') this.#gone('ice_disconnected');
      }, DISCONNECTED_GRACE_MS);
    } else {
      clearTimeout(this.#disconnectedTimer);
      this.#disconnectedTimer = undefined;
    }
  }

  #gone(reason: LostReason): void {
    clearTimeout(this.#disconnectedTimer);
    this.#disconnectedTimer = undefined;
    if (this.#ready && !this.#closed) {
      this.#ready = false;
      this.#events.lost(reason);
    }
  }

  /**
   * Sends candidates found after the offer (and the end of them) to `sink`, those found so far
   * first. Call once the runtime has the offer: a candidate it gets before would have no peer.
   */
  trickleTo(sink: CandidateSink): void {
    this.#trickle.sink = sink;
    for (const candidate of this.#trickle.queued.splice(0)) sink(candidate);
  }

  #candidateFound(candidate: RTCIceCandidate | null): void {
    // Before the offer is taken, localDescription carries them; only later ones are trickled.
    if (!this.#trickle.taken || this.#closed) return;
    // A second copy would make the runtime's ICE agent pair and check it again.
    if (candidate && this.#offered.has(candidateKey(candidate.candidate))) return;
    const entry = candidate && candidate.candidate !== '' ? candidateEntry(candidate) : undefined;
    if (this.#trickle.sink) this.#trickle.sink(entry);
    else this.#trickle.queued.push(entry);
  }

  transceiver(name: string): RTCRtpTransceiver | undefined {
    return this.#transceivers.get(name);
  }

  async createOffer(): Promise<{ sdp: string; mapping: TrackMappingEntry[] }> {
    const offer = await this.pc.createOffer();
    let sdp: string | undefined;
    if (this.#gatherTimeoutMs <= 0) {
      // Trickle everything: the offer as created (no candidates), every candidate after it.
      this.#trickle.taken = true;
      await this.pc.setLocalDescription(offer);
      sdp = offer.sdp;
    } else {
      await this.pc.setLocalDescription(offer);
      await this.#waitForFirstCandidate();
      // From here on, a new candidate is not in the SDP read below: it is trickled.
      this.#trickle.taken = true;
      sdp = this.pc.localDescription?.sdp;
    }
    if (!sdp) throw new ArclightError('connection_failed', 'The browser produced no SDP offer.');
    this.#offered = new Set(
      sdp
        .split(/\r?\n/)
        .filter((line) => line.startsWith('a=candidate:'))
        .map((line) => candidateKey(line.slice(2))),
    );
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

  /**
   * Resolves once the peer is connected and the data channel open — on the event that makes it
   * so (connection state, channel open), not on a poll.
   */
  waitReady(timeoutMs: number): Promise<void> {
    return new Promise((resolve, reject) => {
      let settled = false;
      const check = () => {
        if (settled) return;
        if (this.#closed) return finish(new ArclightError('connection_failed', 'The connection was closed while connecting.'));
        const state = this.pc.connectionState;
        if (state === 'failed') return finish(new ArclightError('connection_failed', 'ICE/DTLS failed: no network path to the runtime.'));
        if (state === 'connected' && this.channel.readyState === 'open') {
          this.#ready = true;
          finish();
        }
      };
      const timer = setTimeout(() => finish(new ArclightError('timeout', `Not connected after ${timeoutMs} ms.`)), timeoutMs);
      const finish = (error?: ArclightError) => {
        settled = true;
        clearTimeout(timer);
        this.pc.removeEventListener('connectionstatechange', check);
        this.pc.removeEventListener('iceconnectionstatechange', check);
        this.channel.removeEventListener('open', check);
        this.#onClose.delete(check);
        if (error) reject(error);
        else resolve();
      };
      this.pc.addEventListener('connectionstatechange', check);
      // Some libwebrtc builds report `failed` on the ICE state first.
      this.pc.addEventListener('iceconnectionstatechange', check);
      this.channel.addEventListener('open', check);
      this.#onClose.add(check);
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
    clearTimeout(this.#disconnectedTimer);
    this.#trickle.sink = undefined;
    for (const settle of [...this.#onClose]) settle();
    try {
      this.channel.close();
    } catch {
      // already closed
    }
    this.pc.close();
  }

  /**
   * Waits until the local description holds a candidate (the peer found its first one), gathering
   * is complete, the link closed, or `gatherTimeoutMs` passed — on the events, not a poll.
   */
  async #waitForFirstCandidate(): Promise<void> {
    if (this.pc.iceGatheringState === 'complete' || hasCandidate(this.pc.localDescription?.sdp)) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, this.#gatherTimeoutMs);
      const pc = this.pc;
      const onClose = this.#onClose;
      const gatheringChanged = () => pc.iceGatheringState === 'complete' && done();
      pc.addEventListener('icecandidate', done);
      pc.addEventListener('icegatheringstatechange', gatheringChanged);
      onClose.add(done);
      function done() {
        clearTimeout(timer);
        pc.removeEventListener('icecandidate', done);
        pc.removeEventListener('icegatheringstatechange', gatheringChanged);
        onClose.delete(done);
        resolve();
      }
    });
  }
}

function isPeerClosed(raw: string): boolean {
  if (raw.length > 200 || !raw.includes(PEER_CLOSED_MESSAGE)) return false;
  try {
    const message = JSON.parse(raw) as { scope?: unknown; data?: { type?: unknown } };
    return message?.scope === 'runtime' && message.data?.type === PEER_CLOSED_MESSAGE;
  } catch {
    return false;
  }
}

/** A candidate's identity — foundation, component, transport, priority, address, port, type — without the extensions the SDP line and the event's string differ in (`ufrag`). */
function candidateKey(candidate: string): string {
  return candidate.split(' ', 8).join(' ');
}

function hasCandidate(sdp: string | undefined): boolean {
  return sdp !== undefined && /^a=candidate:/m.test(sdp);
}

function candidateEntry(candidate: RTCIceCandidate): IceCandidateEntry {
  return {
    candidate: candidate.candidate,
    ...(candidate.sdpMid != null ? { sdp_mid: candidate.sdpMid } : {}),
    ...(candidate.sdpMLineIndex != null ? { sdp_m_line_index: candidate.sdpMLineIndex } : {}),
    ...(candidate.usernameFragment ? { username_fragment: candidate.usernameFragment } : {}),
  };
}
