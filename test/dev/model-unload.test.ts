/**
 * A model's `unload()`: each version gives back what its `load()` took once it stops serving — when
 * a reload replaces it, when its own load fails, and when the runtime closes — once each, and a
 * throwing unload is logged without taking the runtime down. (definePythonModel relies on it to
 * stop a replaced version's worker processes under `arclight dev`.)
 */

import { afterAll, describe, expect, it } from 'vitest';
import { startRuntime, type ModelDefinition, type Runtime } from '../../runtime/index.ts';

const LOOPBACK = '127.0.0.1';

function version(
  tag: string,
  unloaded: string[],
  options: { failLoad?: boolean; failUnload?: boolean } = {},
): ModelDefinition<Record<string, never>> {
  return {
    name: 'unloadable',
    fps: 10,
    tracks: [{ name: 'main_video', kind: 'video', direction: 'recvonly', width: 64, height: 64 }],
    load: () => {
      if (options.failLoad) throw new Error(`${tag} cannot load`);
    },
    unload: () => {
      unloaded.push(tag);
      if (options.failUnload) throw new Error(`${tag} cannot unload`);
    },
    async run(session) {
      for await (const _ of session.ticks()) break;
    },
  };
}

describe('a model version is unloaded once it stops serving', () => {
  let runtime: Runtime | undefined;
  afterAll(async () => runtime?.close());

  it('on a reload, a failed load and close; a throwing unload is survived', async () => {
    const unloaded: string[] = [];
    runtime = await startRuntime({
      model: version('v1', unloaded) as never,
      port: 0,
      host: LOOPBACK,
      ice: { hostAddresses: [LOOPBACK] },
      playground: false,
      dev: true,
    });
    await runtime.loaded;
    expect(unloaded).toEqual([]);

    expect((await runtime.reloadModel(version('v2', unloaded, { failUnload: true }) as never)).ok).toBe(true);
    expect(unloaded).toEqual(['v1']);

    // A version whose load fails never serves: it is unloaded, the serving one is not.
    expect((await runtime.reloadModel(version('v3', unloaded, { failLoad: true }) as never)).ok).toBe(false);
    expect(unloaded).toEqual(['v1', 'v3']);

    // v2's unload throws: logged, and the reload (and the runtime) go on.
    expect((await runtime.reloadModel(version('v4', unloaded) as never)).ok).toBe(true);
    expect(unloaded).toEqual(['v1', 'v3', 'v2']);
    expect((await fetch(`${runtime.url}/health`)).ok).toBe(true);

    await runtime.close();
    runtime = undefined;
    expect(unloaded).toEqual(['v1', 'v3', 'v2', 'v4']);
  });
});
