/**
 * A browser lip-syncs the session's audio and video (issue 3, part 2). Chromium, in a throwaway
 * network namespace, plays the `av-sync` fixture's audio and video through the client library;
 * its inbound-rtp stats report, per track, `estimatedPlayoutTimestamp`: the sender's wall-clock
 * time (from RTCP sender reports) of what is playing out now. Sampled together, audio's and
 * video's agree to within two video frames and stay put — with werift's stock sender reports (whole-second
 * NTP resolution) they did not.
 */

import { expect, it } from 'vitest';
import model from '../fixtures/av-sync-model.ts';
import { browserRig, openClientPage, type PageWindow } from '../support/browser-rig.ts';

const rig = browserRig(model, 'av-sync-browser', { chromiumArgs: ['--autoplay-policy=no-user-gesture-required'] });

it('plays audio and video at the same sender time, steadily (estimatedPlayoutTimestamp within 80 ms)', async () => {
  const { page } = await openClientPage(rig());
  const samples = await page.evaluate(async () => {
    const { ArclightClient } = window as unknown as PageWindow;
    const client = new ArclightClient({ modelName: 'av-sync', local: true, localRuntimeUrl: location.origin });
    client.on('trackReceived', (_name, track) => {
      const element = document.createElement(track.kind === 'video' ? 'video' : 'audio');
      element.autoplay = true;
      (element as HTMLMediaElement).muted = false;
      element.srcObject = new MediaStream([track]);
      document.body.append(element);
      void element.play().catch((e: unknown) => console.log('play failed', String(e)));
    });
    await client.connect();
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    // Sender reports (every 0.5–1.5 s) arrive and Chromium's A/V sync loop (which moves the delay
    // in steps, about one a second) converges: 4 s was not always enough (diffs still at 80 ms).
    await sleep(8000);
    const out: Array<{ audio: number | null; video: number | null }> = [];
    for (let i = 0; i < 20; i++) {
      const report = await client.getPeerConnection()!.getStats();
      let audio: number | null = null;
      let video: number | null = null;
      report.forEach((s: { type: string; kind?: string; estimatedPlayoutTimestamp?: number }) => {
        if (s.type !== 'inbound-rtp' || s.estimatedPlayoutTimestamp === undefined) return;
        if (s.kind === 'audio') audio = s.estimatedPlayoutTimestamp;
        if (s.kind === 'video') video = s.estimatedPlayoutTimestamp;
      });
      out.push({ audio, video });
      await sleep(200);
    }
    await client.disconnect();
    return out;
  });
  const diffs = samples.filter((s) => s.audio !== null && s.video !== null).map((s) => s.video! - s.audio!);
  const context = JSON.stringify(diffs.map(Math.round));
  expect(diffs.length, JSON.stringify(samples)).toBeGreaterThanOrEqual(10);
  // In sync and staying there: within 80 ms (two video frames at 25 fps) and steady. With the
  // broken NTP times, the offset swung by hundreds of ms as each sender report re-anchored it.
  for (const diff of diffs) expect(Math.abs(diff), context).toBeLessThan(80);
  expect(Math.max(...diffs) - Math.min(...diffs), context).toBeLessThan(40);
}, 60_000);
