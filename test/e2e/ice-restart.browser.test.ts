/**
 * ICE restart in Chromium (issue 10, part 3): the client library in a page, in a throwaway
 * network namespace (test/support/browser-rig.ts), watching `pattern` on a runtime whose peers'
 * datagrams the test-only NetworkFaults switch can black out. A blackout long enough for
 * Chromium's ICE to go `disconnected` past the client's grace makes the client renegotiate a
 * fresh peer on the same connection id: same session, and the <video> plays again.
 */

import { describe, expect, it } from 'vitest';
import pattern from '../../models/examples/pattern/index.ts';
import { NetworkFaults } from '../../runtime/faults/network-faults.ts';
import { browserRig, openClientPage, type PageWindow } from '../support/browser-rig.ts';
import { pollUntil } from '../support/poll.ts';

type Watch = PageWindow & {
  watch: {
    client: InstanceType<PageWindow['ArclightClient']>;
    frames: number[];
    events: Array<{ name: string; at: number; data: unknown }>;
    sessionId: string | undefined;
    connectionId: number | undefined;
  };
};

describe('ICE restart in Chromium', () => {
  const network = new NetworkFaults();
  const rig = browserRig(pattern, 'ice-restart', { peerFaults: { network } });

  it('a path failure: the client restarts ICE on the same connection and the video plays again', { timeout: 90_000 }, async () => {
    const { page, log } = await openClientPage(rig());
    const diagnostics = async () =>
      `\n--- page ---\n${log.slice(-30).join('\n')}\n${JSON.stringify(await page.evaluate(() => (window as unknown as Watch).watch.events).catch(() => null))}`;
    await page.evaluate(async () => {
      const w = window as unknown as Watch;
      const client = new w.ArclightClient({ modelName: 'pattern', local: true, localRuntimeUrl: location.origin });
      const video = document.createElement('video');
      video.muted = true;
      video.autoplay = true;
      video.playsInline = true;
      document.body.append(video);
      const frames: number[] = [];
      const onFrame = () => {
        frames.push(performance.now());
        video.requestVideoFrameCallback(onFrame);
      };
      video.requestVideoFrameCallback(onFrame);
      const events: Array<{ name: string; at: number; data: unknown }> = [];
      for (const name of ['reconnecting', 'reconnected', 'statusChanged', 'error'] as const) {
        client.on(name, (data: unknown) =>
          events.push({ name, at: performance.now(), data: data instanceof Error ? `${data.name}: ${data.message}` : data }),
        );
      }
      client.on('trackReceived', (name, track) => {
        if (name === 'main_video' && track.kind === 'video') video.srcObject = new MediaStream([track]);
      });
      w.watch = { client, frames, events, sessionId: undefined, connectionId: undefined };
      await client.connect();
      w.watch.sessionId = client.getSessionId();
      w.watch.connectionId = client.getConnectionId();
    });
    await pollUntil('the first frames', () => page.evaluate(() => (window as unknown as Watch).watch.frames.length > 10), {
      timeoutMs: 15_000,
      diagnostics,
    });

    const darkAt = await page.evaluate(() => performance.now());
    // Until the restart has begun (Chromium says `disconnected` ~5 s into the outage, the client
    // restarts 2 s later) and a moment more, so the path is still down when the restart's offer
    // goes out. Ended by the test rather than timed: a fixed outage races the detection on a
    // loaded machine (the Node twin of this test failed CI that way).
    network.blackout(60_000);
    await pollUntil(
      'reconnecting',
      () => page.evaluate(() => (window as unknown as Watch).watch.events.find((e) => e.name === 'reconnecting')),
      { timeoutMs: 25_000, diagnostics },
    );
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    network.clear();
    const reconnected = await pollUntil(
      'reconnected',
      () => page.evaluate(() => (window as unknown as Watch).watch.events.find((e) => e.name === 'reconnected')),
      { timeoutMs: 30_000, diagnostics },
    );
    const backAt = reconnected.at;
    await pollUntil(
      'frames after the restart',
      () => page.evaluate((at) => (window as unknown as Watch).watch.frames.filter((t) => t > at).length >= 10, backAt),
      { timeoutMs: 10_000, diagnostics },
    );
    const state = await page.evaluate(() => {
      const { client, sessionId, connectionId, events } = (window as unknown as Watch).watch;
      return {
        status: client.getStatus(),
        sameSession: client.getSessionId() === sessionId,
        sameConnection: client.getConnectionId() === connectionId,
        events,
      };
    });
    const detail = JSON.stringify({ darkAt, ...state });
    expect(state.status, detail).toBe('ready');
    expect(state.sameSession).toBe(true);
    expect(state.sameConnection).toBe(true);
    expect(
      state.events.filter((e) => e.name === 'error'),
      detail,
    ).toEqual([]);
    // Measured on a loaded 2-core machine: Chromium says `disconnected` ~5 s into the outage, the
    // restart starts 2 s later and connects as soon as the outage ends.
    await page.evaluate(() => (window as unknown as Watch).watch.client.disconnect());
    await page.close();
  });
});
