import { createSocket, type Socket } from 'node:dgram';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { impairSocket, NetworkFaults } from './network-faults.ts';

afterEach(() => {
  vi.useRealTimers();
});

/** A fake clock the delay lines and blackouts read (Date.now is faked with the timers). */
function fakeClock(): () => number {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
  return () => Date.now();
}

describe('NetworkFaults', () => {
  it('drops the drawn share of datagrams and counts them', () => {
    let i = 0;
    // Every fourth draw is below 0.25: a quarter is lost.
    const faults = new NetworkFaults({ random: () => (i++ % 4 === 3 ? 0.1 : 0.9) });
    faults.set({ lossPercent: 25 });
    const line = faults.createLine('outbound');
    const delivered: number[] = [];
    for (let n = 0; n < 100; n++) line.pass(() => delivered.push(n));
    expect(delivered).toHaveLength(75);
    expect(delivered).not.toContain(3);
    expect(faults.counters).toEqual({ dropped: 25, delayed: 0, delivered: 75 });
  });

  it('is transparent with nothing set, and after clear()', () => {
    const faults = new NetworkFaults({ random: () => 0 });
    const line = faults.createLine('outbound');
    let delivered = 0;
    line.pass(() => delivered++);
    faults.set({ lossPercent: 100 });
    line.pass(() => delivered++);
    faults.clear();
    line.pass(() => delivered++);
    expect(delivered).toBe(2);
  });

  it('delays each datagram by delayMs and keeps their order when the delay is lowered', () => {
    const now = fakeClock();
    const faults = new NetworkFaults({ now });
    const line = faults.createLine('outbound');
    const arrivals: Array<[number, number]> = [];
    const start = now();
    faults.set({ delayMs: 75 });
    line.pass(() => arrivals.push([1, now() - start]));
    vi.advanceTimersByTime(10);
    line.pass(() => arrivals.push([2, now() - start]));
    // Lowered mid-flight: the third would be due before the first two, and must wait for them.
    faults.set({ delayMs: 5 });
    line.pass(() => arrivals.push([3, now() - start]));
    vi.advanceTimersByTime(64);
    expect(arrivals).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(arrivals.map(([n]) => n)).toEqual([1]);
    vi.advanceTimersByTime(10);
    expect(arrivals).toEqual([
      [1, 75],
      [2, 85],
      [3, 85],
    ]);
    expect(faults.counters).toEqual({ dropped: 0, delayed: 3, delivered: 3 });
    // Back to no delay: nothing queued, so the next one goes at once.
    faults.set({});
    line.pass(() => arrivals.push([4, now() - start]));
    expect(arrivals.at(-1)).toEqual([4, 85]);
  });

  it('drops everything during a blackout, then lets datagrams through again', () => {
    const now = fakeClock();
    const faults = new NetworkFaults({ now, random: () => 0.99 });
    const line = faults.createLine('outbound');
    let delivered = 0;
    faults.blackout(2_000);
    expect(faults.blackedOut()).toBe(true);
    line.pass(() => delivered++);
    vi.advanceTimersByTime(1_999);
    line.pass(() => delivered++);
    vi.advanceTimersByTime(1);
    expect(faults.blackedOut()).toBe(false);
    line.pass(() => delivered++);
    expect(delivered).toBe(1);
    expect(faults.counters.dropped).toBe(2);
  });

  it('blacks out one direction only when asked', () => {
    const now = fakeClock();
    const faults = new NetworkFaults({ now });
    const out = faults.createLine('outbound');
    const back = faults.createLine('inbound');
    const delivered: string[] = [];
    faults.blackout(1_000, 'outbound');
    out.pass(() => delivered.push('out'));
    back.pass(() => delivered.push('in'));
    expect(delivered).toEqual(['in']);
    expect([faults.blackedOut('outbound'), faults.blackedOut('inbound')]).toEqual([true, false]);
    vi.advanceTimersByTime(1_000);
    out.pass(() => delivered.push('out'));
    expect(delivered).toEqual(['in', 'out']);
  });
});

describe('impairSocket', () => {
  const sockets: Socket[] = [];
  afterEach(() => {
    for (const socket of sockets.splice(0)) socket.close();
  });

  async function boundSocket(): Promise<Socket> {
    const socket = createSocket('udp4');
    sockets.push(socket);
    await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
    return socket;
  }

  async function collect(socket: Socket, count: number, timeoutMs = 2_000): Promise<string[]> {
    const received: string[] = [];
    socket.on('message', (message) => received.push(message.toString()));
    const deadline = Date.now() + timeoutMs;
    while (received.length < count && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    return received;
  }

  it('impairs both directions of a socket: a blackout drops what it sends and what it receives', async () => {
    const a = await boundSocket();
    const b = await boundSocket();
    const received: string[] = [];
    // The impaired socket's existing 'message' listener is what werift's UdpTransport adds.
    a.on('message', (message) => received.push(message.toString()));
    const faults = new NetworkFaults();
    impairSocket(a, faults);
    impairSocket(a, faults); // idempotent: one wrapper
    const atB = collect(b, 2, 300);

    faults.blackout(10_000);
    let acknowledged = false;
    a.send(Buffer.from('out-dropped'), b.address().port, '127.0.0.1', (error) => (acknowledged = error === null));
    b.send(Buffer.from('in-dropped'), a.address().port, '127.0.0.1');
    await new Promise((resolve) => setTimeout(resolve, 100));
    faults.clear();
    a.send(Buffer.from('out-ok'), b.address().port, '127.0.0.1');
    b.send(Buffer.from('in-ok'), a.address().port, '127.0.0.1');

    expect(await atB).toEqual(['out-ok']);
    expect(received).toEqual(['in-ok']);
    expect(acknowledged).toBe(true); // a dropped send still calls back, without an error
    expect(faults.counters).toEqual({ dropped: 2, delayed: 0, delivered: 2 });
  });

  it('delays in order, with the bytes a datagram had when it was sent', async () => {
    const a = await boundSocket();
    const b = await boundSocket();
    const faults = new NetworkFaults();
    faults.set({ delayMs: 50 });
    impairSocket(a, faults);
    const atB = collect(b, 20);
    const buffer = Buffer.alloc(2);
    const sentAt = performance.now();
    for (let n = 0; n < 20; n++) {
      buffer.write(String(n).padStart(2, '0'));
      a.send(buffer, b.address().port, '127.0.0.1'); // the caller reuses its buffer
    }
    const received = await atB;
    expect(performance.now() - sentAt).toBeGreaterThanOrEqual(49);
    expect(received).toEqual(Array.from({ length: 20 }, (_, n) => String(n).padStart(2, '0')));
    expect(faults.counters.delayed).toBe(20);
  });
});
