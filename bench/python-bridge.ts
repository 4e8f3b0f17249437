/**
 * The cost of the Python worker bridge (issue 28), against the same model in-process.
 *
 *   node --conditions=source --import tsx bench/python-bridge.ts [--frames 150] [--rounds 3] [--trials 20] [--json out.json]
 *
 * Per frame (720p and 1080p, RGBA webcam frame in → RGBA frame out): the model's `generate` is
 * called back to back, exactly as the step driver calls it, with a new webcam frame each step —
 *   python     definePythonModel over bench/models/bridge_bench.py: the runtime pwrites the input
 *              into the ring, a JSON line goes to the worker, numpy copies the input view into the
 *              output slot (np.copyto), a JSON line comes back, the runtime preads the output;
 *   in-process the same model as a TypeScript step model: one copy of the input into an output
 *              buffer (what np.copyto does).
 * Figures: wall µs per frame (median of the rounds' medians; p10–p90 of all frames), CPU µs per
 * frame of this process and of the worker (/proc/<pid>/stat), and that CPU as % of a core at 30 fps.
 * Overhead = python − in-process.
 *
 * End to end (720p): each model served by a real runtime to a Node client (@roamhq/wrtc) over
 * loopback; `set_level` alternates the frame between two greys and the time from sending the
 * command to the first decoded frame showing the new grey is taken (`--trials` per model,
 * interleaved). Command round trip + step + encode + RTP + decode: the latency a viewer feels.
 */

import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { ArclightClient } from '../client/node.ts';
import { defineModel, startRuntime, type ModelDefinition, type ModelSession, type Runtime, type VideoFrame } from '../runtime/index.ts';
import { definePythonModel } from '../runtime/python/define-python-model.ts';
import { FrameRing } from '../runtime/python/frame-ring.ts';
import { VideoProbe, waitUntil } from '../test/support/video-probe.ts';
import { loadavg, median, summarise } from './support/measure.ts';
import { finishReport, runBench, runInfo } from './support/report.ts';

const { values: args } = parseArgs({
  options: {
    frames: { type: 'string', default: '150' },
    rounds: { type: 'string', default: '3' },
    trials: { type: 'string', default: '20' },
    json: { type: 'string' },
  },
});
const FRAMES = Number(args.frames);
const ROUNDS = Number(args.rounds);
const TRIALS = Number(args.trials);
const SIZES = [
  { label: '720p', width: 1280, height: 720 },
  { label: '1080p', width: 1920, height: 1080 },
] as const;
/** /proc/<pid>/stat counts CPU in clock ticks: USER_HZ, 100 on Linux. */
const TICK_US = 10_000;

type Step = { index: number; failures: number; settings: Readonly<Record<string, unknown>> };
interface Generator {
  generate(input: unknown, session: ModelSession<never>, step: Step): unknown;
}

function tracks(width: number, height: number) {
  return [
    { name: 'webcam', kind: 'video', direction: 'sendonly', format: 'rgba' },
    { name: 'main_video', kind: 'video', direction: 'recvonly', width, height },
  ] as const;
}

function pythonModel(width: number, height: number) {
  return definePythonModel({
    name: 'bridge-bench',
    module: new URL('./models/bridge_bench.py', import.meta.url),
    fps: 30,
    tracks: tracks(width, height),
  });
}

interface TwinState {
  level: number | undefined;
  out: Uint8Array | undefined;
}
function inProcessModel(width: number, height: number): ModelDefinition<TwinState> {
  return defineModel({
    name: 'bridge-bench',
    fps: 30,
    tracks: tracks(width, height),
    createSessionState: (): TwinState => ({ level: undefined, out: undefined }),
    commands: {
      set_level: {
        params: {
          type: 'object',
          properties: { value: { type: 'integer', minimum: 0, maximum: 255 } },
          required: ['value'],
          additionalProperties: false,
        },
        handler: (params: { value: number }, { session }: { session: ModelSession<TwinState> }) => {
          session.state.level = params.value;
        },
      },
    },
    beforeStep: (session) => ({ cam: session.inputVideo('webcam').latest() }),
    generate: ({ cam }: { cam: VideoFrame | undefined }, session) => {
      const out = (session.state.out ??= new Uint8Array(width * height * 4));
      if (session.state.level === undefined && cam && cam.width === width && cam.height === height) out.set(cam.data);
      else out.fill(session.state.level ?? 0);
      return { width, height, format: 'rgba', data: out } satisfies VideoFrame;
    },
  }) as never;
}

/** Process CPU (user + system) in µs from /proc/<pid>/stat. */
function processCpuUs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * TICK_US;
}

function fakeSession(id: string, webcam: { frame: VideoFrame | undefined }): ModelSession<never> {
  const log = { info: () => {}, warn: () => {}, error: () => {} };
  return {
    id,
    log,
    broadcast: () => {},
    state: undefined as never,
    inputVideo: () => ({
      latest: () => webcam.frame,
      frames: () => {
        throw new Error('unused');
      },
    }),
  } as unknown as ModelSession<never>;
}

interface PerFrame {
  wallUs: number[];
  nodeCpuUs: number;
  workerCpuUs: number;
}

async function perFrame(
  model: ModelDefinition<never> & Partial<Generator>,
  width: number,
  height: number,
  workerPid: () => number | undefined,
  sessionId: string,
): Promise<PerFrame> {
  const webcam: { frame: VideoFrame | undefined } = { frame: undefined };
  const session = fakeSession(sessionId, webcam);
  await model.hooks?.session_started?.(session as never);
  const inputs = [1, 2].map((seed) => ({ width, height, format: 'rgba' as const, data: new Uint8Array(width * height * 4).fill(seed) }));
  const state = (model.createSessionState?.() ?? {}) as never;
  (session as { state: unknown }).state = state;
  const step = async (index: number): Promise<void> => {
    webcam.frame = { ...inputs[index % 2]! }; // a new frame object each step: the bridge writes it
    const input = await model.beforeStep!(session, { index, failures: 0, settings: {} });
    const output = (await model.generate!(input as never, session, { index, failures: 0, settings: {} })) as
      { video?: VideoFrame[] } | VideoFrame;
    const frame = 'video' in output ? output.video![0]! : (output as VideoFrame);
    if (frame.data[0] !== (index % 2) + 1) throw new Error(`step ${index}: wrong output`);
  };
  for (let i = 0; i < 10; i++) await step(i); // warm
  const wallUs: number[] = [];
  const pid = workerPid();
  const cpu0 = process.cpuUsage();
  const worker0 = pid ? processCpuUs(pid) : 0;
  for (let i = 0; i < FRAMES; i++) {
    const t0 = performance.now();
    await step(i);
    wallUs.push((performance.now() - t0) * 1000);
  }
  const cpu = process.cpuUsage(cpu0);
  const worker = pid ? processCpuUs(pid) - worker0 : 0;
  await model.hooks?.session_ended?.(session as never, 'bench');
  return { wallUs, nodeCpuUs: (cpu.user + cpu.system) / FRAMES, workerCpuUs: worker / FRAMES };
}

/** The bridge's two copies alone: pwrite of a frame into a slot and pread of it back, µs per frame. */
function ringCopiesUs(bytes: number): number[] {
  const ring = FrameRing.create({ slotCount: 2, slotBytes: bytes });
  const frame = new Uint8Array(bytes).fill(7);
  const back = new Uint8Array(bytes);
  const times: number[] = [];
  try {
    for (let i = 0; i < FRAMES + 10; i++) {
      const t0 = performance.now();
      ring.write(0, frame);
      ring.read(1, bytes, back);
      if (i >= 10) times.push((performance.now() - t0) * 1000);
    }
  } finally {
    ring.close();
  }
  return times;
}

async function commandToPixels(runtime: Runtime, trials: number, out: number[]): Promise<void> {
  const client = new ArclightClient({ modelName: 'bridge-bench', local: true, localRuntimeUrl: runtime.url });
  const probeReady = new Promise<VideoProbe>((resolve) =>
    client.on('trackReceived', (name, track) => name === 'main_video' && resolve(new VideoProbe(track))),
  );
  await client.connect();
  const probe = await probeReady;
  try {
    await waitUntil(() => probe.frames > 5, 20_000, 'frames');
    for (let i = 0; i < trials; i++) {
      const level = i % 2 ? 40 : 200;
      const seen = probe.frames;
      const t0 = performance.now();
      await client.sendCommand('set_level', { value: level });
      const luma = 16 + (level * 219) / 255; // limited-range Y of the grey
      await waitUntil(() => probe.frames > seen && Math.abs(probe.sample(640, 360).y - luma) < 12, 10_000, `level ${level}`);
      out.push(performance.now() - t0);
    }
  } finally {
    probe.stop();
    await client.disconnect().catch(() => {});
  }
}

await runBench('python-bridge', async () => {
  const info = runInfo();
  process.stdout.write(
    `python-bridge: ${FRAMES} frames × ${ROUNDS} rounds per size; ${TRIALS} end-to-end trials per model; loadavg ${info.loadavgBefore}\n`,
  );
  const results: Record<string, unknown> = {};
  for (const size of SIZES) {
    const py = pythonModel(size.width, size.height);
    await py.load!({ progress: () => {} });
    const twin = inProcessModel(size.width, size.height);
    const rounds: { python: PerFrame; inProcess: PerFrame }[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const inProcess = await perFrame(twin as never, size.width, size.height, () => undefined, `twin-${r}`);
      const python = await perFrame(py as never, size.width, size.height, () => py.python.pids[0], `py-${r}`);
      rounds.push({ python, inProcess });
    }
    await py.python.close();
    const fig = (pick: (p: { python: PerFrame; inProcess: PerFrame }) => PerFrame) => {
      const all = rounds.flatMap((r) => pick(r).wallUs);
      const s = summarise(all);
      return {
        wallUsMedian: median(rounds.map((r) => median(pick(r).wallUs))),
        wallUsP10: [...all].sort((a, b) => a - b)[Math.floor(all.length * 0.1)]!,
        wallUsP90: s.p90,
        nodeCpuUs: median(rounds.map((r) => pick(r).nodeCpuUs)),
        workerCpuUs: median(rounds.map((r) => pick(r).workerCpuUs)),
      };
    };
    const copies = median(Array.from({ length: ROUNDS }, () => median(ringCopiesUs(size.width * size.height * 4))));
    const python = fig((r) => r.python);
    const inProcess = fig((r) => r.inProcess);
    const pct = (us: number): number => +((us * 30) / 1e4).toFixed(1);
    results[size.label] = {
      python,
      inProcess,
      ringCopiesUs: copies,
      overheadUs: python.wallUsMedian - inProcess.wallUsMedian,
      cpuPctOfCoreAt30fps: { python: pct(python.nodeCpuUs + python.workerCpuUs), inProcess: pct(inProcess.nodeCpuUs) },
    };
    process.stdout.write(
      `${size.label}: python ${python.wallUsMedian.toFixed(0)} µs/frame (p10–p90 ${python.wallUsP10.toFixed(0)}–${python.wallUsP90.toFixed(0)}; CPU node ${python.nodeCpuUs.toFixed(0)} + worker ${python.workerCpuUs.toFixed(0)} µs = ${pct(python.nodeCpuUs + python.workerCpuUs)} % of a core at 30 fps)\n`,
    );
    process.stdout.write(
      `${size.label}: in-process ${inProcess.wallUsMedian.toFixed(0)} µs/frame (p10–p90 ${inProcess.wallUsP10.toFixed(0)}–${inProcess.wallUsP90.toFixed(0)}; CPU ${inProcess.nodeCpuUs.toFixed(0)} µs = ${pct(inProcess.nodeCpuUs)} %)\n`,
    );
    process.stdout.write(
      `${size.label}: bridge overhead ${(python.wallUsMedian - inProcess.wallUsMedian).toFixed(0)} µs/frame, of which the pwrite + pread alone ${copies.toFixed(0)} µs\n`,
    );
  }

  // End to end, 720p: command → first decoded frame with the new picture.
  const e2e = { python: [] as number[], inProcess: [] as number[] };
  const py = pythonModel(1280, 720);
  const servers: Record<'python' | 'inProcess', Runtime> = {
    python: await startRuntime({
      model: py as never,
      port: 0,
      host: '127.0.0.1',
      ice: { hostAddresses: ['127.0.0.1'] },
      playground: false,
      latencyMode: 'realtime',
    }),
    inProcess: await startRuntime({
      model: inProcessModel(1280, 720) as never,
      port: 0,
      host: '127.0.0.1',
      ice: { hostAddresses: ['127.0.0.1'] },
      playground: false,
      latencyMode: 'realtime',
    }),
  };
  try {
    await Promise.all(Object.values(servers).map((r) => r.loaded));
    for (let round = 0; round < 2; round++) {
      for (const which of ['python', 'inProcess'] as const) await commandToPixels(servers[which], Math.ceil(TRIALS / 2), e2e[which]);
    }
  } finally {
    await Promise.all(Object.values(servers).map((r) => r.close()));
    await py.python.close();
  }
  for (const which of ['python', 'inProcess'] as const) {
    const s = summarise(e2e[which]);
    results[`e2e720p_${which}`] = s;
    process.stdout.write(
      `e2e 720p ${which}: command → pixels p50 ${s.p50.toFixed(1)} ms, p90 ${s.p90.toFixed(1)} ms, min ${s.min.toFixed(1)}, max ${s.max.toFixed(1)} (n=${s.n})\n`,
    );
  }
  finishReport(info, loadavg(), args.json, results);
});
