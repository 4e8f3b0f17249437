/**
 * Moderation end to end: a real runtime on loopback with a pluggable moderator, our Node client
 * sending commands over the data channel. The acceptance of issue 5's moderation: checks one at
 * a time in arrival order, a command still waiting after 2 s admitted, a rejection failing the
 * command with `moderation_rejected` before its handler runs, a field without the opt-in never
 * sent to the moderator — and a moderator that fails (thrown, or an HTTP service erroring)
 * admitting the command while the runtime carries on.
 */

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ArclightClient, ArclightError } from '../../client/node.ts';
import {
  HttpModerator,
  MODERATED_KEYWORD,
  startRuntime,
  WordListModerator,
  type ModerationRequest,
  type ModerationVerdict,
  type Runtime,
} from '../../runtime/index.ts';
import moderatedModel, { handled } from '../fixtures/moderated-model.ts';

const LOOPBACK = '127.0.0.1';

/** The moderator the runtime holds; each test sets what it does. */
let behaviour: (request: ModerationRequest) => ModerationVerdict | Promise<ModerationVerdict> = () => ({ allowed: true });
const seen: ModerationRequest[] = [];

async function checks(runtime: Runtime, outcome: string): Promise<number> {
  const metric = await runtime.metrics.moderationChecks.get();
  return metric.values.find((v) => v.labels['outcome'] === outcome)?.value ?? 0;
}

/** A check that never answers on its own; it ends only when the runtime abandons it. */
function neverAnswers(request: ModerationRequest): Promise<ModerationVerdict> {
  return new Promise((_resolve, reject) => request.signal.addEventListener('abort', () => reject(new Error('abandoned')), { once: true }));
}

describe('moderation over loopback', () => {
  let runtime: Runtime;
  let client: ArclightClient;

  beforeAll(async () => {
    runtime = await startRuntime({
      model: moderatedModel as never,
      port: 0,
      host: LOOPBACK,
      ice: { hostAddresses: [LOOPBACK] },
      moderation: { moderator: { check: (request) => (seen.push(request), behaviour(request)) } },
    });
    client = new ArclightClient({ modelName: 'moderated', local: true, localRuntimeUrl: runtime.url });
    await client.connect();
  });
  afterAll(async () => {
    await client?.disconnect().catch(() => {});
    await runtime?.close();
  });
  beforeEach(() => {
    seen.length = 0;
    handled.length = 0;
    behaviour = () => ({ allowed: true });
  });

  it('advertises the opt-in in the command schema', () => {
    const caption = client.getCapabilities()?.commands?.find((c) => c.name === 'caption');
    const properties = (caption?.schema as { properties: Record<string, Record<string, unknown>> }).properties;
    expect(properties['text']?.[MODERATED_KEYWORD]).toBe(true);
    expect(properties['font']?.[MODERATED_KEYWORD]).toBeUndefined();
  });

  it('fails a rejected command with moderation_rejected; its handler never runs', async () => {
    behaviour = (request) => new WordListModerator(['forbidden'], { category: 'test' }).check(request);
    const failure = await client.sendCommand('caption', { text: 'some forbidden words' }).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(ArclightError);
    expect(failure).toMatchObject({ code: 'moderation_rejected', field: '/text' });
    expect((failure as Error).message).toContain('"/text" contains a blocked word');
    expect((failure as Error).message).toContain('category: test');
    expect(handled).toEqual([]);
    // The same command with acceptable text runs.
    expect(await client.sendCommand('caption', { text: 'kind words' })).toEqual({ type: 'caption_set', data: { text: 'kind words' } });
    expect(handled).toEqual(['caption:kind words']);
    expect(await checks(runtime, 'rejected')).toBeGreaterThanOrEqual(1);
  });

  it('sends only opted-in fields, and nothing for commands without moderated text', async () => {
    behaviour = (request) => new WordListModerator(['forbidden']).check(request);
    // `font` is not opted in: it never reaches the moderator, whatever it says.
    await client.sendCommand('caption', { text: 'hello', font: 'forbidden' });
    expect(seen.map((r) => r.fields)).toEqual([{ '/text': 'hello' }]);
    expect(seen[0]).toMatchObject({ sessionId: client.getSessionId(), command: 'caption' });
    // Blank text and commands without moderated parameters are not checked at all.
    await client.sendCommand('caption', { text: '   ' });
    await client.sendCommand('set_speed', { speed: 3 });
    expect(seen).toHaveLength(1);
    expect(handled).toEqual(['caption:hello', 'caption:   ', 'set_speed:3']);
  });

  it('checks one command at a time, in the order they arrived', async () => {
    let active = 0;
    let maxActive = 0;
    behaviour = async () => {
      active++;
      maxActive = Math.max(maxActive, active);
      await new Promise((resolve) => setTimeout(resolve, 40));
      active--;
      return { allowed: true };
    };
    const texts = ['one', 'two', 'three', 'four', 'five'];
    const replies = await Promise.all(texts.map((text) => client.sendCommand('caption', { text })));
    expect(replies.map((r) => (r?.data as { text: string }).text)).toEqual(texts);
    expect(seen.map((r) => r.fields['/text'])).toEqual(texts);
    expect(maxActive).toBe(1);
    expect(handled).toEqual(texts.map((t) => `caption:${t}`));
  });

  it('admits a command still waiting after 2 s; other commands are not held behind it', async () => {
    behaviour = neverAnswers;
    const timeoutsBefore = await checks(runtime, 'timeout');
    const started = performance.now();
    let captionDone = false;
    const caption = client.sendCommand('caption', { text: 'slow to judge' }).finally(() => (captionDone = true));
    // A command without moderated text passes while the caption waits.
    await client.sendCommand('set_speed', { speed: 7 });
    expect(captionDone).toBe(false);
    expect(await caption).toEqual({ type: 'caption_set', data: { text: 'slow to judge' } });
    expect(performance.now() - started).toBeGreaterThanOrEqual(1_900);
    expect(handled).toEqual(['set_speed:7', 'caption:slow to judge']);
    expect(await checks(runtime, 'timeout')).toBe(timeoutsBefore + 1);
    expect(seen[0]?.signal.aborted).toBe(true); // the abandoned check was told
  });

  it('admits when the moderator throws, and the runtime carries on', async () => {
    const errorsBefore = await checks(runtime, 'error');
    behaviour = () => {
      throw new Error('moderator bug');
    };
    expect(await client.sendCommand('caption', { text: 'a' })).toEqual({ type: 'caption_set', data: { text: 'a' } });
    behaviour = () => Promise.reject(new Error('moderator down'));
    expect(await client.sendCommand('caption', { text: 'b' })).toEqual({ type: 'caption_set', data: { text: 'b' } });
    expect(await checks(runtime, 'error')).toBe(errorsBefore + 2);
    expect(handled).toEqual(['caption:a', 'caption:b']);
    expect(client.getStatus()).toBe('ready');
    expect((await fetch(`${runtime.url}/health`)).status).toBe(200);
  });

  describe('through HttpModerator and a moderation service on 127.0.0.1', () => {
    let service: Server;
    let answer: { status: number; body: string } = { status: 200, body: '{"allowed":true}' };
    beforeAll(async () => {
      service = createServer((req, res) => {
        req.resume();
        req.on('end', () => res.writeHead(answer.status, { 'content-type': 'application/json' }).end(answer.body));
      });
      await new Promise<void>((resolve) => service.listen(0, LOOPBACK, resolve));
    });
    afterAll(async () => {
      service.closeAllConnections();
      await new Promise<void>((resolve) => service.close(() => resolve()));
    });

    it('rejects what the service rejects, and admits when the service fails', async () => {
      const moderator = new HttpModerator({ url: `http://${LOOPBACK}:${(service.address() as AddressInfo).port}/check` });
      behaviour = (request) => moderator.check(request);
      answer = { status: 200, body: JSON.stringify({ allowed: false, reason: 'not on this stream', category: 'spam' }) };
      const failure = await client.sendCommand('caption', { text: 'buy now' }).catch((e: unknown) => e);
      expect(failure).toMatchObject({ code: 'moderation_rejected' });
      expect((failure as Error).message).toContain('not on this stream');
      answer = { status: 500, body: 'oops' };
      const errorsBefore = await checks(runtime, 'error');
      expect(await client.sendCommand('caption', { text: 'buy now' })).toEqual({ type: 'caption_set', data: { text: 'buy now' } });
      expect(await checks(runtime, 'error')).toBe(errorsBefore + 1);
      expect(handled).toEqual(['caption:buy now']);
    });
  });
});

describe('moderation options', () => {
  it('refuses a moderator without check() and a bad admission delay at start', async () => {
    await expect(
      startRuntime({ model: moderatedModel as never, port: 0, host: LOOPBACK, moderation: { moderator: {} as never } }),
    ).rejects.toThrow(TypeError);
    await expect(
      startRuntime({
        model: moderatedModel as never,
        port: 0,
        host: LOOPBACK,
        moderation: { moderator: { check: () => ({ allowed: true }) }, admitAfterMs: -1 },
      }),
    ).rejects.toThrow(/admitAfterMs/);
  });
});
