/**
 * `startLocalStack` (what `npm start` runs), all real and all on 127.0.0.1 with free ports and a
 * temporary SQLite file: the demo key mints tokens with `mintToken`; a Node client connects
 * through the coordinator to the hosted runtime and receives video; the playground's runtime
 * mints tokens for its own page only; a second start on the same database keeps the demo
 * account and its credits, and replaces the key (the old one is refused).
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ArclightClient } from 'arclight/client/node';
import { ArclightError, mintToken } from 'arclight/client/server';
import pattern from '../../models/examples/pattern/index.ts';
import { startRuntime } from '../../runtime/index.ts';
import { createLogger } from '../../server-kit/log.ts';
import { DEFAULT_SIGNUP_CREDITS } from '../../coordinator/index.ts';
import { DEMO_ACCOUNT_NAME, DEMO_CREDITS, startLocalStack, type LocalStack } from '../../dev/local-stack.ts';
import { VideoProbe, waitUntil } from '../support/video-probe.ts';

const LOOPBACK = '127.0.0.1';
const folder = mkdtempSync(join(tmpdir(), 'arclight-stack-'));
const database = join(folder, 'coordinator.db');
const logger = createLogger({ test: 'local-stack' }, 'warn');
const stacks: LocalStack[] = [];
const probes: VideoProbe[] = [];

function start(): Promise<LocalStack> {
  return startLocalStack({
    model: pattern as never,
    port: 0,
    coordinatorPort: 0,
    database,
    host: LOOPBACK,
    ice: { hostAddresses: [LOOPBACK] },
    logger,
  }).then((stack) => {
    stacks.push(stack);
    return stack;
  });
}

afterAll(async () => {
  for (const probe of probes) probe.stop();
  for (const stack of stacks) await stack.close();
  rmSync(folder, { recursive: true, force: true });
});

describe('the local stack', () => {
  let firstKey: string;
  let accountId: string;

  it('streams from the hosted runtime to a Node client through the coordinator, with a token minted from the demo key', async () => {
    const stack = await start();
    for (const url of [stack.playgroundUrl, stack.coordinatorUrl, stack.hostedRuntimeUrl])
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(stack.modelName).toBe('pattern');
    expect(stack.apiKey).toMatch(/^rk_/);
    firstKey = stack.apiKey;
    accountId = stack.demoAccountId;
    expect((await stack.coordinator.accounts.get(accountId))?.name).toBe(DEMO_ACCOUNT_NAME);
    expect((await stack.coordinator.ledger.balance(accountId)).credits).toBe(DEMO_CREDITS);
    // The account dashboard's purchases work locally: the stack runs the test payment provider.
    const account = await fetch(`${stack.coordinatorUrl}/platform/account`, { headers: { authorization: `Bearer ${stack.apiKey}` } });
    expect(((await account.json()) as { payment_provider: string | null }).payment_provider).toBe('test');
    expect((await fetch(`${stack.coordinatorUrl}/dashboard/`)).status).toBe(200);

    const { token } = await mintToken({ coordinatorUrl: stack.coordinatorUrl, apiKey: stack.apiKey, models: ['pattern'], maxSessions: 1 });
    const client = new ArclightClient({ modelName: 'pattern', apiUrl: stack.coordinatorUrl });
    const video = new Promise<VideoProbe>((resolve) => {
      client.on('trackReceived', (name, track) => {
        if (name !== 'main_video' || track.kind !== 'video') return;
        const probe = new VideoProbe(track);
        probes.push(probe);
        resolve(probe);
      });
    });
    await client.connect(token);
    const sessionId = client.getSessionId()!;
    // Placed on the hosted runtime (the coordinator's id there), not on the playground's runtime.
    expect(stack.hostedRuntime.sessions.current?.id).toBe(sessionId);
    expect(stack.localRuntime.sessions.current).toBeUndefined();
    const probe = await video;
    await waitUntil(() => probe.frames >= 10, 20_000, 'ten frames through the coordinator');
    await waitUntil(async () => (await stack.coordinator.sessions.get(sessionId))?.status === 'ready', 10_000, 'the session to be ready');
    await client.disconnect();
    await waitUntil(() => stack.hostedRuntime.sessions.current === undefined, 10_000, 'the hosted runtime to end the session');
  }, 90_000);

  it("gives the playground's own page a scoped token for the model, and refuses pages elsewhere", async () => {
    const stack = stacks[0]!;
    const config = await (await fetch(`${stack.playgroundUrl}/playground/config`)).json();
    expect(config).toEqual({ hosted: { coordinator_url: stack.coordinatorUrl } });

    const origin = stack.playgroundUrl;
    const response = await fetch(`${stack.playgroundUrl}/playground/token`, { method: 'POST', headers: { origin } });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { token: string; token_type: string; expires_at: number };
    expect(body.token_type).toBe('Bearer');
    expect(body.expires_at * 1000).toBeGreaterThan(Date.now() + 3_500_000);
    const verified = await stack.coordinator.tokens.verify(body.token);
    expect(verified.accountId).toBe(accountId);
    expect(verified.models).toEqual(['pattern']);
    expect(verified.maxSessions).toBe(1); // one session per Connect

    const foreign = await fetch(`${stack.playgroundUrl}/playground/token`, {
      method: 'POST',
      headers: { origin: 'http://elsewhere.example' },
    });
    expect(foreign.status).toBe(403);
    expect(((await foreign.json()) as { code: string }).code).toBe('forbidden');
  });

  it('a second start on the same database keeps the demo account and its credits, with a new key; the old key is revoked', async () => {
    await stacks[0]!.close();
    const stack = await start();
    expect(stack.demoAccountId).toBe(accountId);
    expect(stack.apiKey).not.toBe(firstKey);
    const refused = await mintToken({ coordinatorUrl: stack.coordinatorUrl, apiKey: firstKey, models: ['pattern'] }).catch(
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(ArclightError);
    expect((refused as ArclightError).code).toBe('unauthorized');
    expect((await mintToken({ coordinatorUrl: stack.coordinatorUrl, apiKey: stack.apiKey, models: ['pattern'] })).token).toBeTruthy();
    const keys = await stack.coordinator.apiKeys.list(accountId);
    expect(keys.filter((key) => key.revokedAt === null)).toHaveLength(1);
    // Not topped up again: the first run spent a few seconds of DEMO_CREDITS, far from half.
    expect((await stack.coordinator.ledger.balance(accountId)).credits).toBeGreaterThan(DEMO_CREDITS / 2);
    // The demo account's grants are still the two of its first start: its signup credits and the
    // top-up to DEMO_CREDITS.
    const grants = (await stack.coordinator.ledger.balance(accountId)).grants.map((g) => g.credits).sort((a, b) => a - b);
    expect(grants).toEqual([DEFAULT_SIGNUP_CREDITS, DEMO_CREDITS - DEFAULT_SIGNUP_CREDITS]);
  }, 60_000);
});

describe('the playground without hosted mode', () => {
  it('offers local mode only and has no token route', async () => {
    const runtime = await startRuntime({ model: pattern as never, port: 0, host: LOOPBACK, ice: { hostAddresses: [LOOPBACK] }, logger });
    try {
      expect(await (await fetch(`${runtime.url}/playground/config`)).json()).toEqual({ hosted: null });
      expect((await fetch(`${runtime.url}/playground/token`, { method: 'POST' })).status).toBe(404);
    } finally {
      await runtime.close();
    }
  });
});
