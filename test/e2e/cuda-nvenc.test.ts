/**
 * End to end on the GPU path, with a FAKE NVIDIA driver (no GPU here: test/support/
 * fake-nvenc-driver.ts; its H.264 is real, lossless I_PCM): a model keeps its picture in CUDA
 * memory and emits CudaVideoFrames; the runtime selects its own NVENC backend. An H.264 viewer
 * (a werift peer, which decodes with FFmpeg) gets frames NVENC encoded from GPU memory; a VP8 viewer
 * (our Node client: wrtc offers no H.264) gets the host-copy path. Both decode the model's colour,
 * and a set_color command that rewrites the GPU buffer shows.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ArclightClient } from '../../client/node.ts';
import {
  commandFor,
  defineModel,
  listEncoderBackends,
  nativeAddon,
  startRuntime,
  type CudaBuffer,
  type Runtime,
} from '../../runtime/index.ts';
import { nativeAddonStatus } from '../../runtime/native/native-addon.ts';
import { rgbToYuv } from '../../models/examples/shared/i420-canvas.ts';
import { installFakeNvencDriver } from '../support/fake-nvenc-driver.ts';
import { readRuntimeEvents } from '../support/event-stream-reader.ts';
import { near, VideoProbe, waitUntil } from '../support/video-probe.ts';
import { decodeTrack, openWeriftPeer } from '../support/werift-peer.ts';

const LOOPBACK = '127.0.0.1';
const W = 160;
const H = 120;
const PITCH = 256;
const LOG = join(tmpdir(), `arclight-cuda-e2e-${process.pid}.jsonl`);
const compiledIn = nativeAddonStatus().loaded && nativeAddon()!.features().nvenc;

interface GpuState {
  buffer: CudaBuffer | undefined;
}

/** Fills an NV12 picture of one colour, as a model's CUDA kernel would leave it. */
function nv12(colour: { y: number; u: number; v: number }): Uint8Array {
  const data = new Uint8Array(PITCH * H * 1.5);
  data.fill(colour.y, 0, PITCH * H);
  for (let i = PITCH * H; i < data.length; i += 2) {
    data[i] = colour.u;
    data[i + 1] = colour.v;
  }
  return data;
}

const command = commandFor<GpuState>();

const gpuModel = defineModel<GpuState>({
  name: 'gpu-colour',
  version: '1.0.0',
  description: 'A solid colour kept in CUDA memory (test model).',
  fps: 30,
  tracks: [{ name: 'main_video', kind: 'video', direction: 'recvonly', width: W, height: H }],
  createSessionState: () => ({ buffer: undefined }),
  commands: {
    set_color: command({
      description: 'Rewrites the GPU picture.',
      params: {
        type: 'object',
        properties: { r: { type: 'number' }, g: { type: 'number' }, b: { type: 'number' } },
        required: ['r', 'g', 'b'],
      },
      handler: ({ r, g, b }, { session }) => {
        session.state.buffer?.upload(nv12(rgbToYuv(r, g, b)));
        return {};
      },
    }),
  },
  async run(session) {
    const buffer = new (nativeAddon()!.CudaBuffer)(PITCH * H * 1.5);
    session.state.buffer = buffer;
    buffer.upload(nv12(rgbToYuv(0xe0, 0x10, 0x10)));
    try {
      for await (const _tick of session.ticks()) {
        await session.emit('main_video', {
          width: W,
          height: H,
          format: 'cuda',
          cuda: { devicePtr: buffer.devicePtr, pitch: PITCH, layout: 'nv12' },
        });
      }
    } finally {
      session.state.buffer = undefined;
      buffer.free();
    }
  },
});

describe.runIf(compiledIn)('CUDA frames → NVENC → WebRTC client (fake NVIDIA driver: no GPU here)', () => {
  let runtime: Runtime;
  const clients: ArclightClient[] = [];
  const probes: VideoProbe[] = [];

  beforeAll(async () => {
    await installFakeNvencDriver(LOG);
    runtime = await startRuntime({
      model: gpuModel as never,
      port: 0,
      host: LOOPBACK,
      ice: { hostAddresses: [LOOPBACK] },
      playground: false,
    });
  }, 120_000);

  afterEach(async () => {
    for (const probe of probes.splice(0)) probe.stop();
    for (const client of clients.splice(0)) await client.disconnect().catch(() => {});
  });

  afterAll(async () => {
    await runtime?.close();
    rmSync(LOG, { force: true });
  });

  it('selects the native NVENC backend for H.264 and reports why the others were not needed', async () => {
    const h264 = (await listEncoderBackends()).find((b) => b.codec === 'h264')!;
    expect(h264.backend?.name).toBe('arclight_nvenc_h264');
    expect(h264.candidates[0]).toEqual({ name: 'arclight_nvenc_h264', hardware: true, status: 'selected' });
  });

  it("streams the model's GPU picture to a VP8 viewer through one host copy per frame, and follows a command that rewrites it", async () => {
    const client = new ArclightClient({ modelName: 'gpu-colour', local: true, localRuntimeUrl: runtime.url });
    clients.push(client);
    const probePromise = new Promise<VideoProbe>((resolve) =>
      client.on('trackReceived', (name, track) => {
        if (name !== 'main_video' || track.kind !== 'video') return;
        const probe = new VideoProbe(track);
        probes.push(probe);
        resolve(probe);
      }),
    );
    await client.connect();
    const probe = await probePromise;
    const centre = () => probe.sample(W / 2, H / 2);
    await waitUntil(() => probe.frames > 0 && near(centre(), rgbToYuv(0xe0, 0x10, 0x10), 3), 20_000, 'the red picture');
    expect([probe.width, probe.height]).toEqual([W, H]);
    await client.sendCommand('set_color', { r: 0x10, g: 0x20, b: 0xe0 });
    await waitUntil(() => near(centre(), rgbToYuv(0x10, 0x20, 0xe0), 3), 20_000, 'the blue picture');

    await client.disconnect();
  }, 60_000);

  it('encodes it for an H.264 viewer with NVENC straight from GPU memory, and the viewer decodes the picture', async () => {
    const peer = await openWeriftPeer(runtime.url, {
      videoMime: 'video/H264',
      videoParameters: 'level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f',
    });
    let decoded = 0;
    let centre: { y: number; u: number; v: number } | undefined;
    const decoding = await decodeTrack(peer, 'main_video', 'h264', (frame) => {
      decoded++;
      const luma = frame.width * frame.height;
      const c = (H / 4) * (W / 2) + W / 4;
      centre = { y: frame.data[(H / 2) * W + W / 2]!, u: frame.data[luma + c]!, v: frame.data[luma * 1.25 + c]! };
    });
    try {
      await waitUntil(
        () => decoded >= 10 && centre !== undefined && near(centre, rgbToYuv(0xe0, 0x10, 0x10), 3),
        20_000,
        '10 decoded frames of the red picture',
      );
    } finally {
      decoding.close();
      await peer.close();
    }
    const encodes = readFileSync(LOG, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { event: string; input?: string; bufferFormat?: string });
    const fromGpu = encodes.filter((e) => e.event === 'encode' && e.input === 'cuda');
    expect(fromGpu.length).toBeGreaterThanOrEqual(10);
    expect(new Set(fromGpu.map((e) => e.bufferFormat))).toEqual(new Set(['NV12']));
    // Only the opening black frame (the runtime's own) went through host memory in this session.
    expect(encodes.filter((e) => e.event === 'encode' && e.input === 'host' && (e as { frameIndex?: number }).frameIndex !== 0)).toEqual(
      [],
    );
  }, 60_000);

  it("records an H.264 viewer's session from the NVENC stream itself: no host copy of any frame, no second encode", async () => {
    const recordingDir = mkdtempSync(join(tmpdir(), 'arclight-cuda-recording-'));
    const recording = await startRuntime({
      model: gpuModel as never,
      port: 0,
      host: LOOPBACK,
      ice: { hostAddresses: [LOOPBACK] },
      playground: false,
      recording: { directory: recordingDir, segmentSeconds: 1 },
    });
    const events = await readRuntimeEvents(recording.url);
    const peer = await openWeriftPeer(recording.url, {
      videoMime: 'video/H264',
      videoParameters: 'level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f',
    });
    try {
      const segments = () => events.all().filter((e) => e.type === 'recording_segment');
      await waitUntil(() => segments().length >= 2, 20_000, 'two recording segments');
      expect(segments().map((e) => (e.type === 'recording_segment' ? e.encoder : undefined))).toEqual(['live', 'live']);
      const metrics = await (await fetch(`${recording.url}/metrics`)).text();
      // The CUDA frames' host copies (for a software encoder or the recorder): none.
      expect(metrics).not.toMatch(/^arclight_cuda_download_seconds_count\{[^}]*\} [1-9]/m);
    } finally {
      events.stop();
      await peer.close();
      await recording.close();
      rmSync(recordingDir, { recursive: true, force: true });
    }
  }, 60_000);
});
