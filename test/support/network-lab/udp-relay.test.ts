/**
 * The relay with real UDP sockets on 127.0.0.1: an echo "server" behind it, a "client" in front.
 * Bounds come from what happened (counts compared with counts; durations only as lower bounds,
 * which a loaded machine can only make easier).
 */

import { createSocket, type Socket } from 'node:dgram';
import { once } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { seededRandom } from './clock.ts';
import { NetworkLab } from './network-lab.ts';
import type { Endpoint } from './sdp-rewrite.ts';

const LOOPBACK = '127.0.0.1';
const open: Array<{ close(): unknown }> = [];

async function udp(address = LOOPBACK): Promise<Socket> {
  const socket = createSocket('udp4');
  socket.bind(0, address);
  await once(socket, 'listening');
  open.push({ close: () => socket.close() });
  return socket;
}

const endpointOf = (socket: Socket): Endpoint => ({ address: socket.address().address, port: socket.address().port });

async function waitFor(condition: () => boolean, what: string, ceilingMs = 10_000): Promise<void> {
  const deadline = Date.now() + ceilingMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

afterEach(async () => {
  for (const item of open.splice(0).reverse()) await item.close();
});

describe('UdpRelay through NetworkLab on 127.0.0.1', () => {
  it('relays both ways, hides each side from the other, and applies loss and delay per direction', async () => {
    const lab = await NetworkLab.start({
      clientSideAddress: LOOPBACK,
      random: seededRandom(11),
      up: { lossPercent: 10, delayMs: 10 },
      down: { delayMs: 15 },
    });
    open.push(lab);
    const server = await udp();
    const seenByServer: Endpoint[] = [];
    server.on('message', (data, from) => {
      seenByServer.push({ address: from.address, port: from.port });
      server.send(data, from.port, from.address); // echo
    });
    const relayed = await lab.relay.exposeServer(endpointOf(server));
    const client = await udp();
    const echoes: Array<{ readonly seq: number; readonly rttMs: number; readonly from: Endpoint }> = [];
    const sentAt = new Map<number, number>();
    client.on('message', (data, from) => {
      const seq = data.readUInt32BE(0);
      echoes.push({ seq, rttMs: performance.now() - sentAt.get(seq)!, from: { address: from.address, port: from.port } });
    });
    for (let seq = 0; seq < 200; seq++) {
      const data = Buffer.alloc(200);
      data.writeUInt32BE(seq, 0);
      sentAt.set(seq, performance.now());
      client.send(data, relayed.port, relayed.address);
      if (seq % 20 === 19) await new Promise((resolve) => setTimeout(resolve, 5));
    }
    // Everything that was not dropped comes back.
    await waitFor(
      () =>
        lab.counters.up.packetsIn === 200 &&
        lab.counters.up.inFlight === 0 &&
        lab.counters.down.inFlight === 0 &&
        echoes.length === lab.counters.down.delivered &&
        lab.counters.down.packetsIn === seenByServer.length,
      'the echoes',
    );
    const { up, down, relay } = lab.counters;
    expect(up.droppedRandom).toBeGreaterThan(5);
    expect(up.delivered).toBe(200 - up.droppedRandom);
    expect(seenByServer).toHaveLength(up.delivered);
    expect(down).toMatchObject({ packetsIn: up.delivered, delivered: up.delivered, droppedRandom: 0 });
    expect(echoes).toHaveLength(up.delivered);
    // The server saw the relay's server-facing socket, the client the relay's client-facing one.
    const client0 = endpointOf(client);
    expect(new Set(seenByServer.map((e) => `${e.address}:${e.port}`)).size).toBe(1);
    expect(seenByServer[0]!.port).not.toBe(client0.port);
    expect(echoes.every((e) => e.from.port === relayed.port)).toBe(true);
    expect(relay).toMatchObject({ clientFacingSockets: 1, serverFacingSockets: 1, refused: 0 });
    // 10 ms up + 15 ms down at least (timers only fire late).
    expect(Math.min(...echoes.map((e) => e.rttMs))).toBeGreaterThanOrEqual(24);
  });

  it('paces a burst at the cap and tail-drops what the queue cannot hold', async () => {
    // 4 Mbit/s: a 1,000-byte datagram every 2 ms; the queue holds 20 of them.
    const lab = await NetworkLab.start({ clientSideAddress: LOOPBACK, up: { capMbps: 4, queueBytes: 20_000 } });
    open.push(lab);
    const server = await udp();
    const arrivals: number[] = [];
    server.on('message', () => arrivals.push(performance.now()));
    const relayed = await lab.relay.exposeServer(endpointOf(server));
    const client = await udp();
    const sentAt = performance.now();
    for (let i = 0; i < 60; i++) client.send(Buffer.alloc(1_000), relayed.port, relayed.address);
    await waitFor(
      () => lab.counters.up.packetsIn === 60 && lab.counters.up.inFlight === 0 && arrivals.length === lab.counters.up.delivered,
      'the burst to drain',
    );
    const { up } = lab.counters;
    // The socket buffers may hand the burst over in pieces, so the queue may drain in between:
    // at least the queue's worth gets through, and whatever did not fit was tail-dropped.
    expect(up.delivered).toBeGreaterThanOrEqual(20);
    expect(up.delivered + up.droppedQueue).toBe(60);
    expect(up.maxQueueBytes).toBeLessThanOrEqual(20_000);
    // n datagrams at 2 ms each: the last cannot arrive sooner than n × 2 ms after the first was
    // sent (late timers deliver later, never sooner; they may bunch deliveries, so the spacing
    // between arrivals is no rule).
    expect(arrivals.at(-1)! - sentAt).toBeGreaterThanOrEqual(up.delivered * 2 - 0.5);
    expect(up.queueDelay.count).toBe(up.delivered);
  });

  it('refuses datagrams from addresses it was not given', async () => {
    const lab = await NetworkLab.start({ clientSideAddress: LOOPBACK });
    open.push(lab);
    const server = await udp();
    const relayed = await lab.relay.exposeServer(endpointOf(server));
    const stranger = await udp('127.0.0.2');
    stranger.send(Buffer.from('hi'), relayed.port, relayed.address);
    await waitFor(() => lab.counters.relay.refused === 1, 'the refusal');
    expect(lab.counters.up.packetsIn).toBe(0);
  });
});
