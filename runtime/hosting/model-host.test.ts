/**
 * ModelHost on its own, with fake sessions and no server: the first load and what it makes of
 * the runtime's state and readiness, reloads (queued, a failing one keeping the old version),
 * and close (the session ends before the model unloads). test/dev/model-reload.test.ts covers
 * the same through a real runtime and client.
 */

import { describe, expect, it } from 'vitest';
import type { Capabilities } from '../../protocol/capabilities.ts';
import type { RuntimeEventBody } from '../../protocol/session-logs.ts';
import { createLogger } from '../../server-kit/log.ts';
import type { CommandRouter } from '../model/command-router.ts';
import type { ModelDefinition } from '../model/definition.ts';
import type { ServedModel } from '../model/model-slot.ts';
import { ModelHost, type ModelSessions } from './model-host.ts';

function definition(name: string, hooks: Pick<ModelDefinition<unknown>, 'load' | 'unload'> = {}): ModelDefinition<unknown> {
  return {
    name,
    fps: 10,
    tracks: [{ name: 'main_video', kind: 'video', direction: 'recvonly', width: 64, height: 64 }],
    async run() {},
    ...hooks,
  };
}

function served(model: ModelDefinition<unknown>, version: number): ServedModel {
  return { definition: model, router: {} as CommandRouter, capabilities: {} as Capabilities, openApi: { title: model.name }, version };
}

/** A ModelHost over fake sessions; `calls` records what the sessions were asked, in order. */
function host(first: ModelDefinition<unknown>) {
  const calls: string[] = [];
  const published: RuntimeEventBody[] = [];
  let loadSeconds: number | undefined;
  const sessions: ModelSessions & { current: unknown } = {
    current: undefined,
    async adoptModel(model) {
      calls.push(`adopt ${model.name}`);
      return 'no_session';
    },
    async close() {
      calls.push('sessions closed');
    },
  };
  const modelHost = new ModelHost({
    first: served(first, 1),
    buildVersion: served,
    sessions,
    events: { publish: (body) => published.push(body) },
    metrics: { modelLoadDuration: { set: (value: number) => (loadSeconds = value) } } as never,
    log: createLogger({}, 'silent'),
  });
  return { modelHost, sessions, calls, published, loadSeconds: () => loadSeconds };
}

describe('ModelHost', () => {
  it('reports loading until the first load() ends, then available, serving with a session, and ready', async () => {
    let finish!: () => void;
    const gate = new Promise<void>((resolve) => (finish = resolve));
    const { modelHost, sessions, published, loadSeconds } = host(definition('m', { load: () => gate }));
    expect(modelHost.state).toBe('loading');
    expect(() => modelHost.assertReady()).toThrow('The model is still loading; retry shortly.');
    finish();
    await modelHost.loaded;
    expect(modelHost.loadState).toBe('loaded');
    expect(modelHost.state).toBe('available');
    expect(() => modelHost.assertReady()).not.toThrow();
    expect(loadSeconds()).toBeTypeOf('number');
    sessions.current = {};
    expect(modelHost.state).toBe('serving');
    expect(published.map((e) => e.type === 'model_load' && e.phase)).toEqual(['loading', 'loaded']);
  });

  it('a failing first load() terminates the runtime and is the last load error', async () => {
    const { modelHost, published } = host(definition('m', { load: () => Promise.reject(new Error('weights missing')) }));
    await modelHost.loaded;
    expect(modelHost.loadState).toBe('failed');
    expect(modelHost.state).toBe('terminated');
    expect(modelHost.lastLoadError).toMatchObject({ code: 'model_load_failed', message: expect.stringContaining('weights missing') });
    expect(() => modelHost.assertReady()).toThrow('The model failed to load; see the runtime log.');
    expect(published.at(-1)).toMatchObject({ type: 'model_load', phase: 'failed' });
  });

  it('reloads one at a time in order; a failing version keeps the old one serving and gives back its load', async () => {
    const unloaded: string[] = [];
    const { modelHost, calls } = host(definition('v1', { unload: () => void unloaded.push('v1') }));
    const second = modelHost.reload(
      definition('v2', {
        load: () => Promise.reject(new Error('broken')),
        unload: () => void unloaded.push('v2'),
      }) as ModelDefinition<never>,
    );
    const third = modelHost.reload(definition('v3') as ModelDefinition<never>);
    expect(await second).toMatchObject({ ok: false, error: { code: 'model_load_failed' } });
    expect(await third).toMatchObject({ ok: true, version: 2, sessions: 'no_session' });
    expect(modelHost.current.definition.name).toBe('v3');
    expect(modelHost.lastLoadError).toBeUndefined();
    expect(calls).toEqual(['adopt v3']);
    expect(unloaded).toEqual(['v2', 'v1']);
  });

  it('an invalid definition is refused without loading anything', async () => {
    const { modelHost } = host(definition('v1'));
    const outcome = await modelHost.reload({ name: 'bad' } as unknown as ModelDefinition<never>);
    expect(outcome.ok).toBe(false);
    expect(modelHost.current.version).toBe(1);
    expect(modelHost.lastLoadError?.code).toBe('model_load_failed');
  });

  it('close ends the session before the model unloads, once; then it is terminated and refuses sessions', async () => {
    const { modelHost, calls } = host(definition('v1', { unload: () => void calls.push('unloaded') }));
    await modelHost.loaded;
    await modelHost.close();
    await modelHost.close();
    expect(calls).toEqual(['sessions closed', 'unloaded']);
    expect(modelHost.closed).toBe(true);
    expect(modelHost.state).toBe('terminated');
    expect(() => modelHost.assertReady()).toThrow('The runtime is shutting down.');
  });
});
