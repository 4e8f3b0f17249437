/**
 * Per-frame metadata from the client to the model (issue 3, part 6), in Chromium.
 *
 * The page (the runtime's playground origin, in a throwaway network namespace) imports the
 * client library, publishes a canvas track with `frameMetadata: true` and, for each frame n,
 * paints brightness level n mod LEVELS, sets `{ n }` as the frame's metadata and captures exactly
 * that frame (`captureStream(0)` + `requestFrame()`). The fixture model
 * (test/fixtures/input-metadata-model.ts) compares every decoded frame's metadata with its
 * pixels. Checked: frames arrive annotated, each annotation sits on its own frame, bytes arrive
 * unchanged, and capture times (converted to the runtime's clock) are recent.
 */

import { expect, it } from 'vitest';
import model, { LEVELS, levelLuma } from '../fixtures/input-metadata-model.ts';
import { browserRig, openClientPage, type PageWindow } from '../support/browser-rig.ts';

const rig = browserRig(model, 'input-metadata');

interface Report {
  frames: number;
  annotated: number;
  matched: number;
  mismatches: Array<{ n: number; level: number }>;
  ages: number[];
  bytes: number[] | null;
}

it("carries each input frame's metadata and capture time to the model, aligned with its frame", async () => {
  const { page, log } = await openClientPage(rig());
  const levels = Array.from({ length: LEVELS }, (_, k) => Math.round(((levelLuma(k) - 16) * 255) / 219));
  let result: { report: Report; sent: number };
  try {
    result = await page.evaluate(
      async ({ levels }) => {
        const { ArclightClient } = window as unknown as PageWindow;
        const client = new ArclightClient({ modelName: 'input-metadata', local: true, localRuntimeUrl: location.origin });
        client.on('error', (e: { code: string; message: string }) => console.log('client error', e.code, e.message));
        await client.connect();
        const canvas = document.createElement('canvas');
        canvas.width = 320;
        canvas.height = 240;
        const ctx = canvas.getContext('2d')!;
        const stream = canvas.captureStream(0);
        const track = stream.getVideoTracks()[0] as MediaStreamTrack & { requestFrame(): void };
        ctx.fillStyle = 'rgb(0,0,0)';
        ctx.fillRect(0, 0, 320, 240);
        await client.publishTrack('camera', track, { frameMetadata: true });
        const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
        let sent = 0;
        for (let n = 0; n < 40; n++) {
          const v = levels[n % levels.length];
          ctx.fillStyle = `rgb(${v},${v},${v})`;
          ctx.fillRect(0, 0, 320, 240);
          client.setInputFrameMetadata('camera', { n });
          track.requestFrame();
          sent++;
          await sleep(100);
        }
        // Bytes travel unchanged.
        client.setInputFrameMetadata('camera', new Uint8Array([0, 1, 2, 255]));
        for (let i = 0; i < 5; i++) {
          ctx.fillRect(0, 0, 320, 240); // a canvas frame is captured only after a draw
          track.requestFrame();
          await sleep(100);
        }
        await sleep(500);
        const reply = await client.sendCommand('report', {});
        await client.disconnect();
        return { report: reply!.data as unknown as Report, sent };
      },
      { levels },
    );
  } catch (error) {
    throw new Error(`${(error as Error).message}\n--- console ---\n${log.slice(-30).join('\n')}`);
  }
  const { report, sent } = result;
  const context = JSON.stringify({ ...report, ages: report.ages.length });
  expect(sent).toBe(40);
  // Every annotated frame carries the metadata set when it was painted.
  expect(report.mismatches, context).toEqual([]);
  expect(report.annotated, context).toBeGreaterThanOrEqual(30);
  expect(report.matched).toBe(report.annotated);
  expect(report.bytes, context).toEqual([0, 1, 2, 255]);
  // Capture time on the runtime's clock: each frame reached the model soon after it was painted.
  const ages = [...report.ages].sort((a, b) => a - b);
  expect(ages.length).toBeGreaterThanOrEqual(30);
  const median = ages[ages.length >> 1]!;
  expect(median).toBeGreaterThan(-25);
  expect(median).toBeLessThan(400);
}, 60_000);
