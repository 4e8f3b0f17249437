/**
 * Multi-client sessions (media engine part 3): several connections share one session; the
 * runtime encodes once per codec and fans out; pause is per connection; one publisher per input
 * track; replies are private, broadcasts reach everyone; a late joiner gets a keyframe at once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArclightClient, wrtc } from '../../client/node.ts';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import echo from '../../models/examples/echo/index.ts';
import { rgbToYuv } from '../../models/examples/shared/i420-canvas.ts';
import { near, VideoProbe, waitUntil } from '../support/video-probe.ts';

const LOOPBACK = '127.0.0.1';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Viewer {
  client: ArclightClient;
  probe: VideoProbe;
  messages: string[];
}

describe('three clients on one session', () => {
  let runtime: Runtime;
  const viewers: Viewer[] = [];
  const colour = rgbToYuv(200, 60, 40);
  let stopCamera = () => {};

  async function join(sessionId?: string): Promise<Viewer> {
    const client = new ArclightClient({ modelName: 'echo', local: true, localRuntimeUrl: runtime.url });
    const messages: string[] = [];
    client.on('message', (m) => messages.push(m.type));
    const probed = new Promise<VideoProbe>((resolve) => client.on('trackReceived', (_n, track) => track.kind === 'video' && resolve(new VideoProbe(track))));
    await client.connect(undefined, sessionId ? { sessionId } : {});
    const viewer = { client, probe: await probed, messages };
    viewers.push(viewer);
    return viewer;
  }

  async function encodes(): Promise<number> {
    return (await runtime.metrics.encodeDuration.get()).values
      .filter((v) => v.metricName === 'arclight_encode_duration_seconds_count')
      .reduce((sum, v) => sum + v.value, 0);
  }

  beforeAll(async () => {
    runtime = await startRuntime({ model: echo as never, port: 0, host: LOOPBACK, ice: { hostAddresses: [LOOPBACK] } });
  });
  afterAll(async () => {
    stopCamera();
    for (const v of viewers) {
      v.probe.stop();
      await v.client.disconnect().catch(() => {});
    }
    await runtime?.close();
  });

  it('shares, fans out, and keeps replies private', async () => {
    const owner = await join();
    const sessionId = owner.client.getSessionId()!;
    const second = await join(sessionId);
    const third = await join(sessionId);
    expect(new Set(viewers.map((v) => v.client.getConnectionId())).size).toBe(3);
    for (const v of viewers) await waitUntil(() => v.probe.frames > 5, 10_000, 'video for every client');

    // Encode once: with three subscribers the encoder still runs once per frame (30 fps).
    const before = await encodes();
    await sleep(2_000);
    const perSecond = ((await encodes()) - before) / 2;
    expect(perSecond).toBeGreaterThan(15);
    expect(perSecond).toBeLessThan(40);

    // Pause is per connection.
    second.client.pauseTrack('main_video');
    await sleep(400);
    const [secondPaused, thirdBefore] = [second.probe.frames, third.probe.frames];
    await sleep(1_000);
    expect(second.probe.frames - secondPaused).toBeLessThanOrEqual(1);
    expect(third.probe.frames - thirdBefore).toBeGreaterThan(15);
    second.client.resumeTrack('main_video');

    // One publisher per input track; the broadcast that follows reaches everyone.
    const Source = (wrtc as unknown as { nonstandard: { RTCVideoSource: new () => { createTrack(): MediaStreamTrack; onFrame(f: object): void } } }).nonstandard.RTCVideoSource;
    const source = new Source();
    const data = new Uint8Array(320 * 240 * 1.5);
    data.fill(colour.y, 0, 320 * 240).fill(colour.u, 320 * 240, 320 * 240 * 1.25).fill(colour.v, 320 * 240 * 1.25);
    const feeder = setInterval(() => source.onFrame({ width: 320, height: 240, data }), 33);
    const camera = source.createTrack();
    stopCamera = () => {
      clearInterval(feeder);
      camera.stop();
    };
    await owner.client.publishTrack('webcam', camera);
    await expect(third.client.publishTrack('webcam', new Source().createTrack())).rejects.toMatchObject({ code: 'track_busy' });
    for (const v of viewers) await waitUntil(() => v.messages.includes('input_started'), 15_000, 'the broadcast at every client');
    for (const v of viewers) await waitUntil(() => near(v.probe.sample(320, 240), colour, 14), 15_000, 'the published picture at every client');

    // A reply goes to its requester only.
    expect((await second.client.sendCommand('set_brightness', { value: 1 }))?.type).toBe('brightness_changed');
    await sleep(300);
    expect(second.messages).toContain('brightness_changed');
    expect(owner.messages).not.toContain('brightness_changed');
    expect(third.messages).not.toContain('brightness_changed');

    // A late joiner gets a keyframe on request, far sooner than the encoder's 10 s periodic one.
    const joinedAt = performance.now();
    const late = await join(sessionId);
    await waitUntil(() => late.probe.centreLuma.some((y) => Math.abs(y - colour.y) < 14), 3_000, 'the late joiner to see the picture');
    expect(performance.now() - joinedAt).toBeLessThan(5_000);
  });
});
