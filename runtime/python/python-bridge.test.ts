/**
 * The Python worker bridge with real Python processes (the test fixture
 * test/fixtures/python/bridge_model.py), under the model test harness: frames both ways
 * bit-exact in every format, commands declared in Python and validated by the runtime, a worker
 * that raises, crashes or hangs (the session ends with a clear error, a fresh worker serves the
 * next one), a load that fails, a missing interpreter, 100 sessions without a leaked segment or
 * descriptor, and two ranks (leader and row slices).
 *
 * Nothing here asserts a duration: bounds are the model's own timeouts, and waits are generous.
 */

import { mkdirSync, mkdtempSync, readdirSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { convertToYuv } from '../media/colour-convert.ts';
import type { VideoFrame } from '../media/frames.ts';
import { createTestSession, type TestSession } from '../testing/index.ts';
import { definePythonModel, type PythonModelDefinition, type PythonModelOptions } from './define-python-model.ts';
import { RING_FILE_PREFIX } from './frame-ring.ts';
import { checkPython } from './python-environment.ts';
import { isPythonWorkerError } from './python-worker-error.ts';

const MODULE = new URL('../../test/fixtures/python/bridge_model.py', import.meta.url);
const W = 64;
const H = 48;

type Session = TestSession<{ python: true }>;
const models: PythonModelDefinition[] = [];

function bridge(overrides: Partial<PythonModelOptions> = {}, inputFormat: 'rgba' | 'i420' = 'rgba'): PythonModelDefinition {
  const model = definePythonModel({
    name: 'bridge',
    module: MODULE,
    fps: 30,
    maxChunk: 4,
    tracks: [
      { name: 'webcam', kind: 'video', direction: 'sendonly', format: inputFormat },
      { name: 'main_video', kind: 'video', direction: 'recvonly', width: W, height: H },
    ],
    ...overrides,
  });
  models.push(model);
  return model;
}

afterAll(async () => {
  await Promise.all(models.map((m) => m.python.close()));
});

let sessionCount = 0;
async function open(model: PythonModelDefinition): Promise<Session> {
  return createTestSession(model as never, { sessionId: `s${++sessionCount}` }) as Promise<Session>;
}

/** Moves the session's clock a frame at a time until `n` frames went out (Python answers in real time). */
async function untilFrames(t: Session, n: number, timeoutMs = 20_000): Promise<readonly VideoFrame[]> {
  const deadline = performance.now() + timeoutMs;
  while (t.frames('main_video').length < n) {
    if (performance.now() > deadline) throw new Error(`only ${t.frames('main_video').length} of ${n} frames within ${timeoutMs} ms`);
    await t.advanceFrames(1);
    await new Promise((resolve) => setTimeout(resolve, 3));
  }
  return t.frames('main_video');
}

/** Moves the clock until the newest frame satisfies `ok` (frames emitted before a command may still be queued). */
async function untilLast(t: Session, ok: (frame: VideoFrame) => boolean, what: string, timeoutMs = 20_000): Promise<VideoFrame> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const last = t.frames('main_video').at(-1);
    if (last && ok(last)) return last;
    if (performance.now() > deadline) throw new Error(`no frame ${what} within ${timeoutMs} ms`);
    await t.advanceFrames(1);
    await new Promise((resolve) => setTimeout(resolve, 3));
  }
}

async function untilEnded(t: Session, timeoutMs = 20_000): Promise<string> {
  const deadline = performance.now() + timeoutMs;
  while (t.endReason === undefined) {
    if (performance.now() > deadline) throw new Error(`the session did not end within ${timeoutMs} ms`);
    await t.advanceFrames(1);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return t.endReason;
}

/** The fixture's byte pattern: ((i * 7 + seed) mod 251) over a frame's bytes. */
function pattern(length: number, seed: number): Uint8Array {
  const out = new Uint8Array(length);
  for (let i = 0; i < length; i++) out[i] = (i * 7 + seed) % 251;
  return out;
}

function random(length: number, seed: number): Uint8Array {
  const out = new Uint8Array(length);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

function logText(t: Session): string {
  return t.logs
    .map(
      (l) =>
        `${l.level} ${l.message} ${JSON.stringify(l.fields, (_k, v: unknown) => (v instanceof Error ? { message: v.message, code: (v as { code?: string }).code } : v))}`,
    )
    .join('\n');
}

/** Ring descriptors this process holds: /proc/self/fd entries pointing at a (deleted) ring file. */
function ringDescriptors(): number {
  let n = 0;
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`).includes(RING_FILE_PREFIX)) n++;
    } catch {
      // closed meanwhile
    }
  }
  return n;
}

function ringFiles(): number {
  return readdirSync('/dev/shm').filter((name) => name.startsWith(RING_FILE_PREFIX)).length;
}

function alive(pid: number | undefined): boolean {
  if (pid === undefined) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('the Python worker bridge', () => {
  const model = bridge();

  it('declares the commands Python declared, with their schemas, reply types and descriptions', () => {
    expect(Object.keys(model.commands ?? {}).sort()).toEqual(['fail', 'set_mode']);
    expect(model.commands!['set_mode']!.params).toMatchObject({ type: 'object', required: ['mode'], additionalProperties: false });
    expect(model.commands!['set_mode']!.reply).toEqual({ type: 'mode_set' });
    expect(model.commands!['set_mode']!.description).toContain('What each step emits');
  });

  it('emits RGBA, I420 and in-place frames bit-exact, RGB as its exact I420 conversion, and chunks in order', async () => {
    const t = await open(model);
    try {
      // The first session loaded the model: the worker's progress reached load()'s context.
      expect(t.logs).toContainEqual(
        expect.objectContaining({ message: 'model load progress', fields: { fraction: 0.5, message: 'halfway' } }),
      );
      expect(t.logs).toContainEqual(
        expect.objectContaining({ message: 'model load progress', fields: { fraction: 1, message: 'loaded' } }),
      );
      const size = { rgba: W * H * 4, i420: (W * H * 3) / 2 };
      // The pattern's first byte is its seed (the step index), so a frame says which pattern it must be.
      const isPattern = (f: VideoFrame, length: number): boolean => Buffer.from(f.data).equals(Buffer.from(pattern(length, f.data[0]!)));
      await t.sendCommand('set_mode', { mode: 'pattern-i420' });
      const i420 = await untilLast(t, (f) => f.format === 'i420', 'in I420');
      expect(i420).toMatchObject({ width: W, height: H });
      expect(isPattern(i420, size.i420)).toBe(true);

      await t.sendCommand('set_mode', { mode: 'pattern-rgba' });
      const rgba = await untilLast(t, (f) => f.format === 'rgba', 'in RGBA');
      expect(rgba).toMatchObject({ width: W, height: H });
      expect(isPattern(rgba, size.rgba)).toBe(true);

      await t.sendCommand('set_mode', { mode: 'pattern-rgb' });
      const rgb = await untilLast(t, (f) => f.format === 'i420', 'from RGB');
      // Which step made it: the one whose RGB pattern converts to exactly these bytes.
      const match = Array.from({ length: 251 }, (_, seed) => seed).find((seed) =>
        Buffer.from(convertToYuv(pattern(W * H * 3, seed), { width: W, height: H, format: 'rgb' })).equals(Buffer.from(rgb.data)),
      );
      expect(match).toBeDefined();

      await t.sendCommand('set_mode', { mode: 'inplace' });
      const inplace = await untilLast(t, (f) => f.format === 'rgba', 'written in place');
      expect(isPattern(inplace, size.rgba)).toBe(true);

      await t.sendCommand('set_mode', { mode: 'chunk' });
      // Chunks of 3 frames whose seeds are step*10 + 0, 1, 2 (mod 251): consecutive triples, every
      // frame the exact pattern of its seed.
      await untilLast(t, (f) => f.format === 'rgba' && f.data[0]! % 10 === 2, 'from a chunk');
      const from = t.frames('main_video').length;
      await untilFrames(t, from + 9);
      const chunked = t.frames('main_video').slice(from);
      const seeds = chunked.map((f) => f.data[0]!);
      const next = (seed: number, k: number): number => (seed + k) % 251;
      const i = seeds.findIndex((seed, j) => seeds[j + 1] === next(seed, 1) && seeds[j + 2] === next(seed, 2));
      expect(i).toBeGreaterThanOrEqual(0);
      expect(seeds.slice(i, i + 6)).toEqual([0, 1, 2, 10, 11, 12].map((k) => next(seeds[i]!, k)));
      for (const f of chunked) expect(isPattern(f, size.rgba)).toBe(true);
    } finally {
      await t.end();
    }
  });

  it('hands webcam frames to Python bit-exact (RGBA), and back', async () => {
    const t = await open(model);
    try {
      await t.sendCommand('set_mode', { mode: 'echo' });
      for (const seed of [1, 2, 3]) {
        const data = Buffer.from(random(W * H * 4, seed));
        t.pushVideo('webcam', { width: W, height: H, format: 'rgba', data });
        await untilLast(t, (f) => f.format === 'rgba' && data.equals(Buffer.from(f.data)), `echoing webcam frame ${seed}`);
      }
      expect(t.frames('main_video').at(-1)).toMatchObject({ width: W, height: H, format: 'rgba' });
    } finally {
      await t.end();
    }
  });

  it('hands I420 webcam frames to Python as planes, bit-exact', async () => {
    const i420 = bridge({}, 'i420');
    const t = await open(i420);
    try {
      await t.sendCommand('set_mode', { mode: 'echo' });
      const data = Buffer.from(random((W * H * 3) / 2, 99));
      t.pushVideo('webcam', { width: W, height: H, format: 'i420', data });
      await untilLast(t, (f) => f.format === 'i420' && data.equals(Buffer.from(f.data)), 'echoing the I420 frame');
    } finally {
      await t.end();
    }
  });

  it('passes no input frame larger than maxInput (the step sees none) and says so once in the session log', async () => {
    const small = bridge({ maxInput: { width: 32, height: 24 } });
    const t = await open(small);
    try {
      await t.sendCommand('set_mode', { mode: 'echo' });
      t.pushVideo('webcam', { width: 128, height: 96, format: 'rgba', data: random(128 * 96 * 4, 5) });
      const deadline = performance.now() + 20_000;
      const warned = (): number =>
        t.logs.filter((l) => l.level === 'warn' && l.message.includes("larger than the Python model's maxInput")).length;
      while (warned() === 0 && performance.now() < deadline) {
        await t.advanceFrames(1);
        await new Promise((resolve) => setTimeout(resolve, 3));
      }
      for (let i = 0; i < 5; i++) await t.advanceFrames(1);
      expect(warned()).toBe(1);
      // The oversized frame never reached Python: nothing of its size came back.
      expect(t.frames('main_video').every((f) => f.width === W && f.height === H)).toBe(true);
      const fits = Buffer.from(random(W * H * 4, 6));
      t.pushVideo('webcam', { width: W, height: H, format: 'rgba', data: fits });
      await untilLast(t, (f) => fits.equals(Buffer.from(f.data)), 'echoing a frame that fits');
      expect(t.endReason).toBeUndefined();
    } finally {
      await t.end();
    }
  });

  it('validates commands with the runtime before Python sees them; CommandError keeps its code, a bug is internal_error', async () => {
    const t = await open(model);
    try {
      expect(await t.sendCommand('set_mode', { mode: 'echo' })).toEqual({
        type: 'mode_set',
        data: { mode: 'echo', rank: 0, world_size: 1 },
      });
      await expect(t.sendCommand('set_mode', { mode: 'nope' })).rejects.toMatchObject({ code: 'invalid_params', field: '/mode' });
      await expect(t.sendCommand('set_mode', { mode: 'echo', extra: 1 })).rejects.toMatchObject({ code: 'invalid_params' });
      await expect(t.sendCommand('set_mode', {})).rejects.toMatchObject({ code: 'invalid_params' });
      await expect(t.sendCommand('fail', { how: 'command_error' })).rejects.toMatchObject({
        code: 'not_today',
        message: 'the model says no',
      });
      await expect(t.sendCommand('fail', { how: 'bug' })).rejects.toMatchObject({ code: 'internal_error' });
      expect(logText(t)).toContain('ValueError: an ordinary bug');
      // Python's session.log and session.broadcast reach the session.
      expect(t.logs).toContainEqual(expect.objectContaining({ message: 'mode set', fields: { mode: 'echo', rank: 0 }, source: 'model' }));
      expect(t.messages).toContainEqual({ type: 'python_hello', data: { session: expect.any(String) }, to: 'all' });
      expect(t.endReason).toBeUndefined();
    } finally {
      await t.end();
    }
  });

  it('a step that raises ends the session (model_error) with the traceback in its log; the worker lives on', async () => {
    const pid = model.python.pids[0];
    const t = await open(model);
    await t.sendCommand('set_mode', { mode: 'raise' });
    expect(await untilEnded(t)).toBe('model_error');
    expect(logText(t)).toContain('RuntimeError: generate blew up');
    expect(model.python.pids[0]).toBe(pid);
    expect(alive(pid)).toBe(true);
  });

  it('a worker that crashes mid-step ends the session with python_worker_crashed; a fresh worker serves the next session', async () => {
    const before = model.python.pids[0];
    const t = await open(model);
    await t.sendCommand('set_mode', { mode: 'crash' });
    expect(await untilEnded(t)).toBe('model_error');
    expect(logText(t)).toMatch(/python worker failed \(python_worker_crashed\): Python worker \(rank 0, pid \d+\) exited with code 7/);
    await expect.poll(() => alive(before), { timeout: 10_000 }).toBe(false);

    const next = await open(model);
    try {
      await next.sendCommand('set_mode', { mode: 'pattern-rgba' });
      await untilFrames(next, 2);
      expect(model.python.pids[0]).not.toBe(before);
    } finally {
      await next.end();
    }
  });

  it('a command that crashes the worker fails with python_worker_crashed, and so does the session', async () => {
    const t = await open(model);
    // The command fails with the worker's code — or, when the step driver saw the crash first and
    // ended the session, with session_ended; either way the session ends and its log says why.
    const failure: unknown = await t.sendCommand('fail', { how: 'crash' }).catch((e: unknown) => e);
    expect(['python_worker_crashed', 'session_ended']).toContain((failure as { code?: string }).code);
    expect(await untilEnded(t)).toBe('model_error');
    expect(logText(t)).toMatch(/python worker failed \(python_worker_crashed\)/);
  });

  it('a hung step (past stepMs) ends the session with python_worker_timeout; the next session gets a fresh worker', async () => {
    const hangs = bridge({ timeouts: { stepMs: 3_000 } });
    const t = await open(hangs);
    const first = hangs.python.pids[0];
    await t.sendCommand('set_mode', { mode: 'hang' });
    expect(await untilEnded(t)).toBe('model_error');
    expect(logText(t)).toMatch(/python worker failed \(python_worker_timeout\): .*did not answer step \d+ within 3000 ms/);
    await expect.poll(() => alive(first), { timeout: 10_000 }).toBe(false);

    await expect.poll(() => hangs.python.pids[0] !== first, { timeout: 10_000 }).toBe(true);
    const third = await open(hangs);
    try {
      await untilFrames(third, 2);
      expect(hangs.python.pids[0]).not.toBe(first);
    } finally {
      await third.end();
    }
  });

  it('a frozen worker (SIGSTOP: no heartbeat) ends the session with python_worker_timeout', async () => {
    const hangs = bridge({ timeouts: { stepMs: 120_000, heartbeatMs: 3_000 } });
    const frozen = await open(hangs);
    const second = hangs.python.pids[0];
    await untilFrames(frozen, 1);
    process.kill(second!, 'SIGSTOP');
    expect(await untilEnded(frozen)).toBe('model_error');
    expect(logText(frozen)).toMatch(/python worker failed \(python_worker_timeout\): .*sent no heartbeat/);
    await expect.poll(() => alive(second), { timeout: 10_000 }).toBe(false);

    const third = await open(hangs);
    try {
      await untilFrames(third, 2);
      expect(hangs.python.pids[0]).not.toBe(second);
    } finally {
      await third.end();
    }
  });

  it('a module whose load raises fails load() with python_load_failed and its traceback', async () => {
    const failing = bridge({ env: { BRIDGE_FAIL_LOAD: '1' } });
    const error: unknown = await failing.python.start().catch((e: unknown) => e);
    expect(isPythonWorkerError(error) && error.code).toBe('python_load_failed');
    expect(String((error as Error).message)).toContain('weights not found (BRIDGE_FAIL_LOAD)');
    expect((error as { detail?: string }).detail).toContain('Traceback');
  });

  it('a worker that crashes while loading fails start() with python_worker_crashed and is not respawned in a loop', async () => {
    const crashing = bridge({ env: { BRIDGE_CRASH_LOAD: '1' } });
    const error: unknown = await crashing.python.start().catch((e: unknown) => e);
    expect(isPythonWorkerError(error) && error.code).toBe('python_worker_crashed');
    expect(String((error as Error).message)).toMatch(/exited with code 11/);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(crashing.python.generations).toBe(1);
    // The next start tries again (and fails the same way).
    await expect(crashing.python.start()).rejects.toMatchObject({ code: 'python_worker_crashed' });
    expect(crashing.python.generations).toBe(2);
  });

  it('without a usable Python, says so with python_unavailable', () => {
    let error: unknown;
    try {
      bridge({ python: '/nonexistent/python3' });
    } catch (e) {
      error = e;
    }
    expect(isPythonWorkerError(error) && error.code).toBe('python_unavailable');
    expect(String(error)).toContain('ARCLIGHT_PYTHON');
  });

  it('names numpy when the interpreter cannot import it', () => {
    // A numpy that fails to import, first on the path: what a Python without numpy looks like.
    const shadow = mkdtempSync(join(tmpdir(), 'arclight-no-numpy-'));
    mkdirSync(join(shadow, 'numpy'));
    writeFileSync(join(shadow, 'numpy', '__init__.py'), 'raise ImportError("No module named \'numpy\' (test)")\n');
    const saved = process.env['PYTHONPATH'];
    process.env['PYTHONPATH'] = shadow;
    try {
      expect(() => checkPython('python3')).toThrow(/cannot import numpy.*python3-numpy/);
      let error: unknown;
      try {
        bridge();
      } catch (e) {
        error = e;
      }
      expect(isPythonWorkerError(error) && error.code).toBe('python_unavailable');
    } finally {
      if (saved === undefined) delete process.env['PYTHONPATH'];
      else process.env['PYTHONPATH'] = saved;
      rmSync(shadow, { recursive: true, force: true });
    }
  });

  it('leaks no shared-memory segment, descriptor or process over 100 sessions (some of them crashing)', async () => {
    const churn = bridge();
    await churn.python.start();
    const pids = new Set<number>();
    for (let i = 0; i < 100; i++) {
      const t = await open(churn);
      for (const pid of churn.python.pids) if (pid) pids.add(pid);
      if (i % 25 === 24) {
        await t.sendCommand('set_mode', { mode: 'crash' });
        await untilEnded(t);
      } else {
        await untilFrames(t, 1);
        await t.end();
      }
      expect(ringFiles()).toBe(0);
    }
    await churn.python.start(); // the last crash's replacement is ready
    const live = churn.python.pids[0];
    pids.add(live!);
    expect(pids.size).toBe(5); // the first worker and one per crash
    for (const pid of pids) if (pid !== live) expect(alive(pid)).toBe(false);
    await churn.python.close();
    await expect.poll(() => alive(live), { timeout: 10_000 }).toBe(false);
    models.splice(models.indexOf(churn), 1);
    expect(ringFiles()).toBe(0);
    // Every other group of this file holds at most one ring descriptor (its live generation).
    expect(ringDescriptors()).toBeLessThanOrEqual(models.length);
  }, 240_000);
});

describe('the Python worker bridge with two ranks', () => {
  it("leader mode: commands reach both ranks, the reply and frames are the leader's", async () => {
    const model = bridge({ ranks: 2 });
    const t = await open(model);
    try {
      expect(model.python.pids).toHaveLength(2);
      expect(await t.sendCommand('set_mode', { mode: 'pattern-rgba' })).toEqual({
        type: 'mode_set',
        data: { mode: 'pattern-rgba', rank: 0, world_size: 2 },
      });
      expect(
        t.logs
          .filter((l) => l.message === 'mode set')
          .map((l) => l.fields?.['rank'])
          .sort(),
      ).toEqual([0, 1]);
      const frames = await untilFrames(t, 3);
      const f = frames.at(-1)!;
      expect(Buffer.from(f.data).equals(Buffer.from(pattern(W * H * 4, f.data[0]!)))).toBe(true);
    } finally {
      await t.end();
    }
  });

  it('slices mode: each rank writes its rows of the same frame', async () => {
    const model = bridge({ ranks: 2, output: 'slices' });
    const t = await open(model);
    try {
      await t.sendCommand('set_mode', { mode: 'slices' });
      const f = await untilLast(t, (frame) => frame.data[3] === 0 && frame.data[W * H * 4 - 1] === 1, "with rank 1's rows");
      const alphaOfRow = (y: number): number => f.data[y * W * 4 + 3]!;
      expect(alphaOfRow(0)).toBe(0);
      expect(alphaOfRow(H / 2 - 1)).toBe(0);
      expect(alphaOfRow(H / 2)).toBe(1);
      expect(alphaOfRow(H - 1)).toBe(1);
      const expected = pattern(W * H * 4, f.data[0]!);
      for (let i = 0; i < expected.length; i += 4) expected[i + 3] = i < (W * H * 4) / 2 ? 0 : 1;
      expect(Buffer.from(f.data).equals(Buffer.from(expected))).toBe(true);
    } finally {
      await t.end();
    }
  });

  it('a crash of rank 1 ends the session cleanly and restarts both ranks', async () => {
    const model = bridge({ ranks: 2 });
    const t = await open(model);
    const before = [...model.python.pids];
    await t.sendCommand('set_mode', { mode: 'crash-rank1' });
    expect(await untilEnded(t)).toBe('model_error');
    expect(logText(t)).toMatch(/python worker failed \(python_worker_crashed\): Python worker \(rank 1, pid \d+\) exited with code 9/);
    for (const pid of before) await expect.poll(() => alive(pid), { timeout: 10_000 }).toBe(false);
    const next = await open(model);
    try {
      await untilFrames(next, 2);
      expect(model.python.pids.every((pid) => pid !== undefined && !before.includes(pid))).toBe(true);
    } finally {
      await next.end();
    }
  });
});
