/**
 * Python models through the real runtime and a real client over loopback WebRTC: the python-tint
 * example (its command in capabilities and /schema, validated before Python; a webcam published
 * by the client, tinted in numpy, received back), and a worker that crashes mid-session — the
 * client gets `session_ended` (model_error), the session's log says `python_worker_crashed`, the
 * runtime lives on and the next session gets a fresh worker.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArclightClient, wrtc } from '../../client/node.ts';
import { definePythonModel, startRuntime, type Runtime } from '../../runtime/index.ts';
import { rgbToYuv, type Yuv } from '../../models/examples/shared/i420-canvas.ts';
import pythonTint, { HEIGHT, WIDTH } from '../../models/examples/python-tint/index.ts';
import { near, VideoProbe, waitUntil } from '../support/video-probe.ts';

const LOOPBACK = '127.0.0.1';
const CAM_W = 320;
const CAM_H = 240;
type VideoSource = { createTrack(): MediaStreamTrack; onFrame(frame: { width: number; height: number; data: Uint8Array }): void };

function solidI420(colour: Yuv): Uint8Array {
  const data = new Uint8Array(CAM_W * CAM_H * 1.5);
  data
    .fill(colour.y, 0, CAM_W * CAM_H)
    .fill(colour.u, CAM_W * CAM_H, CAM_W * CAM_H * 1.25)
    .fill(colour.v, CAM_W * CAM_H * 1.25);
  return data;
}

function client(runtime: Runtime, modelName: string): ArclightClient {
  return new ArclightClient({ modelName, local: true, localRuntimeUrl: runtime.url });
}

function probeOf(c: ArclightClient): Promise<VideoProbe> {
  return new Promise((resolve) => {
    c.on('trackReceived', (name, track) => {
      if (name === 'main_video' && track.kind === 'video') resolve(new VideoProbe(track));
    });
  });
}

describe('python-tint over the real runtime', () => {
  let runtime: Runtime;
  beforeAll(async () => {
    runtime = await startRuntime({
      model: pythonTint as never,
      port: 0,
      host: LOOPBACK,
      ice: { hostAddresses: [LOOPBACK] },
      playground: false,
    });
    await runtime.loaded;
  });
  afterAll(async () => {
    await runtime?.close();
    await pythonTint.python.close();
  });

  it('lists set_tint from Python, tints the published webcam in numpy, and refuses bad params', async () => {
    const schema = (await (await fetch(`${runtime.url}/schema`)).json()) as { paths: Record<string, unknown> };
    expect(JSON.stringify(schema)).toContain('set_tint');
    const c = client(runtime, 'python-tint');
    const messages: { type: string; data?: unknown }[] = [];
    c.on('message', (m) => messages.push(m));
    const probe = probeOf(c);
    const source = new (wrtc as unknown as { nonstandard: { RTCVideoSource: new () => VideoSource } }).nonstandard.RTCVideoSource();
    const input = rgbToYuv(180, 60, 60);
    const camera = solidI420(input);
    const feeder = setInterval(() => source.onFrame({ width: CAM_W, height: CAM_H, data: camera }), 33);
    const track = source.createTrack();
    let video: VideoProbe | undefined;
    try {
      await c.connect();
      expect(c.getCapabilities()?.commands?.map((command) => command.name)).toContain('set_tint');
      video = await probe;
      await c.publishTrack('webcam', track);
      await waitUntil(() => messages.some((m) => m.type === 'input_started'), 20_000, 'the model to see the webcam');
      expect(messages.find((m) => m.type === 'input_started')?.data).toEqual({ width: CAM_W, height: CAM_H });
      const centre = () => video!.sample(WIDTH / 2, HEIGHT / 2);

      expect(await c.sendCommand('set_tint', { color: '#00ff00', strength: 0 })).toEqual({
        type: 'tint_changed',
        data: { color: '#00ff00', strength: 0 },
      });
      await waitUntil(() => video!.frames > 0 && near(centre(), input, 12), 20_000, 'the webcam colour at strength 0');
      expect([video.width, video.height]).toEqual([WIDTH, HEIGHT]);

      // A white tint at full strength leaves each pixel's luma, as grey: neutral chroma.
      expect(await c.sendCommand('set_tint', { color: '#ffffff', strength: 1 })).toEqual({
        type: 'tint_changed',
        data: { color: '#ffffff', strength: 1 },
      });
      const luma = Math.round(0.299 * 180 + 0.587 * 60 + 0.114 * 60);
      await waitUntil(() => near(centre(), rgbToYuv(luma, luma, luma), 12), 20_000, 'grey at full white tint');

      await expect(c.sendCommand('set_tint', { color: 'red' })).rejects.toMatchObject({ code: 'invalid_params' });
    } finally {
      clearInterval(feeder);
      track.stop();
      video?.stop();
      await c.disconnect().catch(() => {});
    }
  });
});

describe('a Python worker that crashes, over the real runtime', () => {
  const bridge = definePythonModel({
    name: 'bridge',
    module: new URL('../fixtures/python/bridge_model.py', import.meta.url),
    fps: 30,
    tracks: [{ name: 'main_video', kind: 'video', direction: 'recvonly', width: 160, height: 120 }],
  });
  let runtime: Runtime;
  beforeAll(async () => {
    runtime = await startRuntime({
      model: bridge as never,
      port: 0,
      host: LOOPBACK,
      ice: { hostAddresses: [LOOPBACK] },
      playground: false,
      reconnectGraceSeconds: 600,
    });
    await runtime.loaded;
  });
  afterAll(async () => {
    await runtime?.close();
    await bridge.python.close();
  });

  it('ends the session for its client with a clear error in the session log; the next session gets a fresh worker', async () => {
    const first = client(runtime, 'bridge');
    const ended = new Promise<string>((resolve) => first.on('sessionEnded', resolve));
    const video = probeOf(first);
    await first.connect();
    const probe = await video;
    await waitUntil(() => probe.frames > 0, 20_000, 'frames from the Python worker');
    const pid = bridge.python.pids[0];
    await first.sendCommand('set_mode', { mode: 'crash' });
    expect(await ended).toBe('model_error');
    probe.stop();
    const logs = await first.getSessionLogs();
    const text = logs.lines.map((line) => JSON.stringify(line)).join('\n');
    expect(text).toMatch(/python worker failed \(python_worker_crashed\): Python worker \(rank 0, pid \d+\) exited with code 7/);
    await first.disconnect().catch(() => {});

    const health = (await (await fetch(`${runtime.url}/health`)).json()) as { status?: string };
    expect(health.status).toBeDefined();

    const second = client(runtime, 'bridge');
    const again = probeOf(second);
    try {
      await second.connect();
      const probe2 = await again;
      await waitUntil(() => probe2.frames > 2, 20_000, 'frames from a fresh worker');
      expect(bridge.python.pids[0]).not.toBe(pid);
      probe2.stop();
    } finally {
      await second.disconnect().catch(() => {});
    }
  });
});
