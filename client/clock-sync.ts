/**
 * The runtime's clock as seen from this page, by pinging it over the data channel: latency
 * measurement corrects the runtime's emit times with it, and input frame annotations carry capture
 * times on the runtime's clock. A few pings, because one round trip may be slowed by anything;
 * the fastest says the most.
 */

import type { RequestSender } from './command-channel.ts';

/** A few pings, each reported as (sent, received, runtime's time); the fastest says the most. */
export async function pingClock(
  sender: RequestSender,
  onSample: (sentAt: number, receivedAt: number, serverTime: number) => void,
): Promise<void> {
  for (let i = 0; i < 5; i++) {
    const sentAt = performance.timeOrigin + performance.now();
    const pong = await sender.request('runtime', 'ping', {});
    const receivedAt = performance.timeOrigin + performance.now();
    const serverTime = (pong?.data as { server_time?: number } | undefined)?.server_time;
    if (typeof serverTime === 'number') onSample(sentAt, receivedAt, serverTime);
  }
}

/** Runtime clock minus this page's clock, ms, from the ping with the smallest round trip. */
export async function clockOffset(sender: RequestSender): Promise<number> {
  let best = { rtt: Infinity, offset: 0 };
  await pingClock(sender, (sentAt, receivedAt, serverTime) => {
    if (receivedAt - sentAt < best.rtt) best = { rtt: receivedAt - sentAt, offset: serverTime - (sentAt + receivedAt) / 2 };
  });
  return best.offset;
}
