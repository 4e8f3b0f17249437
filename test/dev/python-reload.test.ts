/**
 * A Python model under `arclight dev`: each save imports a new version, whose load() starts its own
 * worker processes; the replaced version's workers must stop (its unload), not live until the
 * runtime exits — and the runtime's close stops the serving version's.
 */

import { afterAll, describe, expect, it } from 'vitest';
import { definePythonModel, startRuntime, type Runtime } from '../../runtime/index.ts';
import { pollUntil } from '../support/poll.ts';

const LOOPBACK = '127.0.0.1';
const MODULE = new URL('../fixtures/python/bridge_model.py', import.meta.url);

function version() {
  return definePythonModel({
    name: 'bridge',
    module: MODULE,
    fps: 30,
    tracks: [{ name: 'main_video', kind: 'video', direction: 'recvonly', width: 64, height: 48 }],
  });
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

describe('reloading a Python model', () => {
  let runtime: Runtime | undefined;
  afterAll(async () => runtime?.close());

  it("stops the replaced version's workers, and the last version's at close", async () => {
    const first = version();
    runtime = await startRuntime({
      model: first as never,
      port: 0,
      host: LOOPBACK,
      ice: { hostAddresses: [LOOPBACK] },
      playground: false,
      dev: true,
    });
    await runtime.loaded;
    const firstPids = first.python.pids.filter((pid): pid is number => pid !== undefined);
    expect(firstPids.length).toBeGreaterThan(0);
    expect(firstPids.every(alive)).toBe(true);

    const second = version();
    expect((await runtime.reloadModel(second as never)).ok).toBe(true);
    const secondPids = second.python.pids.filter((pid): pid is number => pid !== undefined);
    expect(secondPids.length).toBeGreaterThan(0);
    await pollUntil("the first version's workers to exit", async () => firstPids.every((pid) => !alive(pid)), { timeoutMs: 10_000 });
    expect(secondPids.every(alive)).toBe(true);

    await runtime.close();
    runtime = undefined;
    await pollUntil("the last version's workers to exit", async () => secondPids.every((pid) => !alive(pid)), { timeoutMs: 10_000 });
  });
});
