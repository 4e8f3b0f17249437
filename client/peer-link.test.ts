/**
 * PeerLink's waits are driven by the peer's events, never by a poll or a fixed delay (issue 26):
 * on fake timers that are never advanced, the offer goes out at the first candidate and "ready"
 * arrives with the events that make it so; a runtime's `peer_closed` drops the link at once. A
 * fake RTCPeerConnection stands in for the browser's.
 */

import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { TrackCapability } from '../protocol/capabilities.ts';
import type { IceCandidateEntry } from '../protocol/transport.ts';
import { PeerLink, type PeerLinkEvents } from './peer-link.ts';

type Listener = (event: unknown) => void;

class FakeEventTarget {
  readonly #listeners = new Map<string, Set<Listener>>();
  addEventListener(type: string, listener: Listener): void {
    let set = this.#listeners.get(type);
    if (!set) this.#listeners.set(type, (set = new Set()));
    set.add(listener);
  }
  removeEventListener(type: string, listener: Listener): void {
    this.#listeners.get(type)?.delete(listener);
  }
  listenerCount(type: string): number {
    return this.#listeners.get(type)?.size ?? 0;
  }
  emit(type: string, event: unknown = {}): void {
    for (const listener of [...(this.#listeners.get(type) ?? [])]) listener(event);
    const handler = (this as unknown as Record<string, unknown>)[`on${type}`];
    if (typeof handler === 'function') (handler as Listener).call(this, event);
  }
}

class FakeChannel extends FakeEventTarget {
  readyState: RTCDataChannelState = 'connecting';
  onmessage: Listener | null = null;
  onclose: Listener | null = null;
  open(): void {
    this.readyState = 'open';
    this.emit('open');
  }
  close(): void {
    this.readyState = 'closed';
  }
}

const OFFER_HEAD = 'v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\na=mid:0\r\n';

class FakePeerConnection extends FakeEventTarget {
  static last: FakePeerConnection;
  onicecandidate: Listener | null = null;
  ontrack: Listener | null = null;
  connectionState: RTCPeerConnectionState = 'new';
  iceConnectionState: RTCIceConnectionState = 'new';
  iceGatheringState: RTCIceGatheringState = 'new';
  localDescription: { type: 'offer'; sdp: string } | null = null;
  readonly channel = new FakeChannel();
  readonly transceivers: Array<{ mid: string | null; kind: string }> = [];

  constructor() {
    super();
    FakePeerConnection.last = this;
  }
  createDataChannel(): FakeChannel {
    return this.channel;
  }
  addTransceiver(kind: string): { mid: string | null; kind: string } {
    const transceiver = { mid: null as string | null, kind };
    this.transceivers.push(transceiver);
    return transceiver;
  }
  async createOffer(): Promise<{ type: 'offer'; sdp: string }> {
    this.transceivers.forEach((t, i) => (t.mid = String(i)));
    return { type: 'offer', sdp: OFFER_HEAD };
  }
  async setLocalDescription(): Promise<void> {
    this.localDescription = { type: 'offer', sdp: OFFER_HEAD };
    this.iceGatheringState = 'gathering';
  }
  async setRemoteDescription(): Promise<void> {}
  /** A candidate found: in the local description first, then its event (as libwebrtc does; its event string has extensions the SDP line lacks). */
  findCandidate(candidate: string): void {
    this.localDescription!.sdp += `a=${candidate}\r\n`;
    this.emit('icecandidate', {
      candidate: { candidate: `${candidate} ufrag abcd`, sdpMid: '0', sdpMLineIndex: 0, usernameFragment: 'abcd' },
    });
  }
  /** Announces a candidate already in the local description (an event still queued when the offer was read). */
  announce(candidate: string): void {
    this.emit('icecandidate', {
      candidate: { candidate: `${candidate} ufrag abcd`, sdpMid: '0', sdpMLineIndex: 0, usernameFragment: 'abcd' },
    });
  }
  completeGathering(): void {
    this.iceGatheringState = 'complete';
    this.emit('icegatheringstatechange');
    this.emit('icecandidate', { candidate: null });
  }
  close(): void {
    this.connectionState = 'closed';
  }
}

const TRACKS: readonly TrackCapability[] = [{ name: 'main_video', kind: 'video', direction: 'recvonly' }];
const UDP_HOST = 'candidate:1 1 udp 2122260223 127.0.0.1 50000 typ host generation 0';
const UDP_OTHER = 'candidate:2 1 udp 2122194687 192.0.2.2 50001 typ host generation 0';
const TCP_HOST = 'candidate:3 1 tcp 1518280447 127.0.0.1 9 typ host tcptype active generation 0';

const events: PeerLinkEvents = { message: () => {}, track: () => {}, lost: () => {} };

function newLink(gatherTimeoutMs?: number): { link: PeerLink; pc: FakePeerConnection } {
  const link = new PeerLink(
    { RTCPeerConnection: FakePeerConnection as unknown as typeof RTCPeerConnection },
    [],
    TRACKS,
    events,
    gatherTimeoutMs === undefined ? {} : { gatherTimeoutMs },
  );
  return { link, pc: FakePeerConnection.last };
}

/** Lets promise continuations run, without moving (fake) time. */
async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await Promise.resolve();
}

describe('PeerLink: no polls, no fixed waits', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('sends the offer at the first candidate, not when gathering completes; the rest is trickled, once each', async () => {
    const { link, pc } = newLink();
    let offer: { sdp: string } | undefined;
    void link.createOffer().then((o) => (offer = o));
    await settle();
    expect(offer).toBeUndefined();
    pc.findCandidate(UDP_HOST);
    await settle();
    // No timer moved: the candidate's event released the offer.
    expect(offer?.sdp).toContain(`a=${UDP_HOST}`);
    expect(pc.iceGatheringState).toBe('gathering');

    const trickled: Array<IceCandidateEntry | undefined> = [];
    link.trickleTo((candidate) => trickled.push(candidate));
    pc.announce(UDP_HOST); // already in the offer: not sent twice
    pc.findCandidate(UDP_OTHER);
    pc.findCandidate(TCP_HOST);
    pc.completeGathering();
    expect(trickled.map((c) => c?.candidate)).toEqual([`${UDP_OTHER} ufrag abcd`, `${TCP_HOST} ufrag abcd`, undefined]);
    link.close();
  });

  it('sends the offer when gathering completes with no candidate at all (a browser in a network without a route)', async () => {
    const { link, pc } = newLink();
    let offer: { sdp: string } | undefined;
    void link.createOffer().then((o) => (offer = o));
    await settle();
    pc.completeGathering();
    await settle();
    expect(offer?.sdp).toBe(OFFER_HEAD);
    link.close();
  });

  it('waits at most gatherTimeoutMs for the first candidate', async () => {
    const { link } = newLink(3_000);
    let offer: { sdp: string } | undefined;
    void link.createOffer().then((o) => (offer = o));
    await settle();
    await vi.advanceTimersByTimeAsync(2_999);
    expect(offer).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(offer?.sdp).toBe(OFFER_HEAD);
    link.close();
  });

  it('is ready on the events that make it so (connected, channel open), with only the deadline as a timer', async () => {
    const { link, pc } = newLink();
    let ready = false;
    void link.waitReady(15_000).then(() => (ready = true));
    await settle();
    expect(vi.getTimerCount()).toBe(1); // the deadline; no interval polls the state
    pc.connectionState = 'connected';
    pc.emit('connectionstatechange');
    await settle();
    expect(ready).toBe(false);
    pc.channel.open();
    await settle();
    expect(ready).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
    expect(pc.listenerCount('connectionstatechange')).toBe(1); // the link's own path watcher only
    expect(pc.channel.listenerCount('open')).toBe(0);
    link.close();
  });

  it('a runtime `peer_closed` on a ready link: lost at once (peer_closed); other messages go to the app', async () => {
    const lost: string[] = [];
    const messages: string[] = [];
    const link = new PeerLink({ RTCPeerConnection: FakePeerConnection as unknown as typeof RTCPeerConnection }, [], TRACKS, {
      message: (raw) => messages.push(raw),
      track: () => {},
      lost: (reason) => lost.push(reason),
    });
    const pc = FakePeerConnection.last;
    const ready = link.waitReady(15_000);
    pc.connectionState = 'connected';
    pc.channel.open();
    await ready;
    const hello = JSON.stringify({ scope: 'runtime', data: { type: 'connection_info', data: { connection_id: 1 } } });
    pc.channel.emit('message', { data: hello });
    expect(messages).toEqual([hello]);
    expect(lost).toEqual([]);
    pc.channel.emit('message', { data: JSON.stringify({ scope: 'runtime', data: { type: 'peer_closed' } }) });
    expect(lost).toEqual(['peer_closed']);
    expect(messages).toHaveLength(1);
    link.close();
  });

  it('fails at once on ICE failure, or when closed while waiting', async () => {
    const first = newLink();
    const failing = first.link.waitReady(15_000).catch((e: unknown) => e);
    first.pc.connectionState = 'failed';
    first.pc.emit('connectionstatechange');
    expect(await failing).toMatchObject({ code: 'connection_failed' });

    const second = newLink();
    const closing = second.link.waitReady(15_000).catch((e: unknown) => e);
    second.link.close();
    expect(await closing).toMatchObject({ code: 'connection_failed' });
    expect(vi.getTimerCount()).toBe(0);
  });
});
