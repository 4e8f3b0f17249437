/**
 * A client's DTLS records that arrive before werift's DTLS transport has started are handed to it
 * when it starts (issue 26): dropped, the client resent its ClientHello only on its back-off
 * timer, 30–100 ms later. Only records no DTLS endpoint has seen are replayed, once.
 */

import type { RTCPeerConnection } from 'werift';
import { describe, expect, it } from 'vitest';
import { keepEarlyDtlsRecords } from './early-dtls.ts';

type Listener<T> = (value: T) => void;

class FakeEvent<T> {
  readonly listeners = new Set<Listener<T>>();
  subscribe(listener: Listener<T>) {
    this.listeners.add(listener);
    return { unSubscribe: () => this.listeners.delete(listener) };
  }
  execute(value: T): void {
    for (const listener of [...this.listeners]) listener(value);
  }
}

function fakePeer(state: string = 'new') {
  const onData = new FakeEvent<Buffer>();
  const onStateChange = new FakeEvent<string>();
  const transport = { state, onStateChange, iceTransport: { connection: { onData } } };
  return { pc: { dtlsTransports: [transport] } as unknown as RTCPeerConnection, transport, onData, onStateChange };
}

const CLIENT_HELLO = Buffer.from([22, 0xfe, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
const STUN = Buffer.from([0, 1, 0, 0]);
const RTP = Buffer.from([0x80, 96, 0, 1]);
const flush = async () => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

describe('keepEarlyDtlsRecords', () => {
  it('replays the DTLS records that came before the transport started, once, after its endpoint listens', async () => {
    const { pc, transport, onData, onStateChange } = fakePeer();
    keepEarlyDtlsRecords(pc);
    onData.execute(STUN);
    onData.execute(CLIENT_HELLO);
    onData.execute(RTP);
    // werift: state `connecting`, then (same turn) its DTLS server subscribes to the ICE data.
    const seen: Buffer[] = [];
    transport.state = 'connecting';
    onStateChange.execute('connecting');
    onData.subscribe((buf) => seen.push(buf));
    await flush();
    expect(seen).toEqual([CLIENT_HELLO]);
    // Later records go straight to it, and nothing is kept or replayed again.
    onData.execute(CLIENT_HELLO);
    await flush();
    expect(seen).toHaveLength(2);
    expect(onData.listeners.size).toBe(1);
    expect(onStateChange.listeners.size).toBe(0);
  });

  it('keeps at most 16 records, and nothing for a transport already started', async () => {
    const { pc, onData, onStateChange } = fakePeer();
    keepEarlyDtlsRecords(pc);
    for (let i = 0; i < 40; i++) onData.execute(CLIENT_HELLO);
    const seen: Buffer[] = [];
    onStateChange.execute('connecting');
    onData.subscribe((buf) => seen.push(buf));
    await flush();
    expect(seen).toHaveLength(16);

    const started = fakePeer('connected');
    keepEarlyDtlsRecords(started.pc);
    expect(started.onData.listeners.size).toBe(0);
  });

  it('a transport that closes or fails first drops what it kept', async () => {
    const { pc, onData, onStateChange } = fakePeer();
    keepEarlyDtlsRecords(pc);
    onData.execute(CLIENT_HELLO);
    const seen: Buffer[] = [];
    onData.subscribe((buf) => seen.push(buf));
    onStateChange.execute('closed');
    await flush();
    expect(seen).toEqual([]); // nothing replayed
    expect(onData.listeners.size).toBe(1); // the test's own listener only
  });
});
