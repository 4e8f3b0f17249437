/**
 * Audio rules on the wire (issue 21 part 12), with a model of two output audio tracks
 * (test/fixtures/two-speakers-model.ts) and the Node client (wrtc) on loopback:
 *   - two output audio tracks end to end: each arrives as its own track with its own sound;
 *   - silence for unfilled ticks: `right`'s model emits nothing, yet its RTP packets flow at the
 *     same rate as `left`'s, and the client hears silence on it;
 *   - zero packets for a paused audio track: once `left` is paused its stream sends nothing.
 * Packets are counted as sent: every UDP datagram of this process goes through
 * `dgram.Socket#send` (the runtime's; wrtc's client sends through its own native sockets), which
 * the test wraps to record each RTP packet's SSRC. Rates are compared with each other, not with
 * the wall clock, so a loaded machine cannot fail the test.
 */
import dgram from 'node:dgram';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArclightClient } from '../../client/node.ts';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import speakers from '../fixtures/two-speakers-model.ts';
import { AudioProbe } from '../support/audio-probe.ts';
import { waitUntil } from '../support/video-probe.ts';

const LOOPBACK = '127.0.0.1';

/** RTP packets sent, per SSRC, in order: [time, payload bytes]. */
const sent = new Map<number, Array<[number, number]>>();
const originalSend = dgram.Socket.prototype.send;

function record(message: unknown): void {
  if (!Buffer.isBuffer(message) || message.length < 12) return;
  const first = message[0]!;
  const second = message[1]!;
  if (first < 128 || first > 191 || (second >= 192 && second <= 223)) return; // STUN, DTLS, RTCP
  const ssrc = message.readUInt32BE(8);
  const list = sent.get(ssrc) ?? [];
  list.push([performance.now(), message.length]);
  sent.set(ssrc, list);
}

/** Packets per SSRC sent after `since`. */
function countsSince(since: number): Map<number, number> {
  const counts = new Map<number, number>();
  for (const [ssrc, list] of sent) counts.set(ssrc, list.filter(([t]) => t > since).length);
  return counts;
}

describe('two output audio tracks on the wire', () => {
  let runtime: Runtime;
  let client: ArclightClient;
  const probes = new Map<string, AudioProbe>();
  beforeAll(async () => {
    dgram.Socket.prototype.send = function (this: dgram.Socket, ...args: unknown[]) {
      record(args[0]);
      return (originalSend as (...a: unknown[]) => void).apply(this, args);
    } as typeof dgram.Socket.prototype.send;
    runtime = await startRuntime({
      model: speakers as never,
      port: 0,
      host: LOOPBACK,
      ice: { hostAddresses: [LOOPBACK] },
      playground: false,
      recording: undefined,
    });
    client = new ArclightClient({ modelName: 'two-speakers', local: true, localRuntimeUrl: runtime.url });
    client.on('trackReceived', (name, track) => {
      if (track.kind === 'audio') probes.set(name, new AudioProbe(track));
    });
    await client.connect();
    await waitUntil(() => probes.size === 2, 15_000, 'both audio tracks');
  }, 60_000);
  afterAll(async () => {
    dgram.Socket.prototype.send = originalSend;
    for (const probe of probes.values()) probe.stop();
    await client?.disconnect();
    await runtime?.close();
  });

  it('each track arrives with its own sound; the unfilled one is silence, sent at the same packet rate', async () => {
    const left = probes.get('left')!;
    const right = probes.get('right')!;
    await waitUntil(() => left.level > 1500, 15_000, 'the left tone');
    // Two audio streams on the wire, both flowing: right's model has emitted nothing, its ticks
    // are filled with silence.
    const since = performance.now();
    await waitUntil(() => [...countsSince(since).values()].filter((n) => n >= 50).length >= 2, 15_000, 'two streams of 50 packets');
    const counts = [...countsSince(since).values()].filter((n) => n > 0).sort((a, b) => b - a);
    expect(counts).toHaveLength(2);
    // Same clock, same rate (20 ms packets): within a few packets of each other, however slow the machine.
    expect(counts[1]! / counts[0]!).toBeGreaterThan(0.8);
    expect(right.chunks).toBeGreaterThan(0);
    expect(right.level).toBeLessThan(200);
    expect(left.level).toBeGreaterThan(1500);
    // Its own sound once the model fills it.
    await client.sendCommand('right_on', {});
    await waitUntil(() => right.level > 1500, 15_000, 'the right tone');
  }, 60_000);

  it('a paused audio track sends zero packets while the other goes on', async () => {
    const before = performance.now();
    await waitUntil(() => [...countsSince(before).values()].filter((n) => n >= 25).length >= 2, 15_000, 'both streams');
    const streams = [...sent.keys()].filter((ssrc) => countsSince(before).get(ssrc)! >= 25);
    client.pauseTrack('left');
    // The pause is in force once a later message on the same ordered channel is answered.
    await client.sendCommand('right_on', {});
    // Packets already encoded when the pause arrived may still leave. The stopped stream is the
    // one whose last packet the other has since outrun by ten (200 ms of audio): a stall of the
    // machine would hold both back alike.
    let stopped: number | undefined;
    let other: number | undefined;
    await waitUntil(
      () => {
        for (const a of streams) {
          const b = streams.find((ssrc) => ssrc !== a)!;
          const lastA = sent.get(a)!.at(-1)![0];
          if (sent.get(b)!.filter(([t]) => t > lastA).length >= 10) [stopped, other] = [a, b];
        }
        return stopped !== undefined;
      },
      15_000,
      'one stream to stop while the other goes on',
    );
    const quietFrom = performance.now();
    await waitUntil(() => (countsSince(quietFrom).get(other!) ?? 0) >= 50, 15_000, 'the other stream to go on');
    const counts = countsSince(quietFrom);
    const paused = streams.filter((ssrc) => ssrc !== other);
    expect(paused).toEqual([stopped]);
    expect(counts.get(paused[0]!)).toBe(0);
    expect(counts.get(other!)).toBeGreaterThanOrEqual(50);
    expect(probes.get('right')!.level).toBeGreaterThan(1500); // the one still playing is right
  }, 60_000);
});
