/**
 * Model author code that fails must never take the runtime down: a handler that throws becomes
 * `internal_error` (its detail stays in the log), a `CommandError` reaches the client verbatim,
 * throwing hooks do not stop clients connecting, and a `run()` that throws ends its session with
 * reason `model_error` — after which a new session starts normally.
 *
 * Everything runs on 127.0.0.1: the runtime listens there and pins ICE to it.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArclightClient, ArclightError } from '../../client/node.ts';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import type { Logger } from '../../server-kit/log.ts';
import faultyModel, { createCrashingModel, SECRET } from '../fixtures/faulty-model.ts';

interface LogRecord {
  readonly level: string;
  readonly msg: string;
  readonly fields: Record<string, unknown>;
}

/** A logger that keeps records in memory (and prints nothing), so tests can quote them. */
function captureLogger(records: LogRecord[], bindings: Record<string, unknown> = {}): Logger {
  const at = (level: string) => (msg: string, fields?: Record<string, unknown>) => {
    records.push({ level, msg, fields: { ...bindings, ...fields } });
  };
  return {
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    child: (more) => captureLogger(records, { ...bindings, ...more }),
  };
}

function logText(records: readonly LogRecord[]): string {
  return records.map((r) => `${r.level} ${r.msg} ${safeJson(r.fields)}`).join('\n');
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value, (_key, v: unknown) => (v instanceof Error ? { name: v.name, message: v.message } : v));
  } catch {
    return '(unserializable)';
  }
}

async function waitUntil(condition: () => boolean | Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The rejection of `promise`, which must reject with an ArclightError. */
async function failureOf(promise: Promise<unknown>): Promise<ArclightError> {
  try {
    const value = await promise;
    throw new Error(`expected a rejection; resolved with ${safeJson(value)}`);
  } catch (error) {
    expect(error).toBeInstanceOf(ArclightError);
    return error as ArclightError;
  }
}

async function startLocalRuntime(model: unknown, logs: LogRecord[]): Promise<Runtime> {
  const runtime = await startRuntime({
    model: model as never,
    port: 0,
    host: '127.0.0.1',
    ice: { hostAddresses: ['127.0.0.1'] },
    playground: false,
    reconnectGraceSeconds: 600,
    logger: captureLogger(logs),
  });
  await runtime.loaded;
  return runtime;
}

describe('model faults: throwing commands and hooks', () => {
  const logs: LogRecord[] = [];
  let runtime: Runtime;
  let client: ArclightClient;
  const clientErrors: ArclightError[] = [];

  beforeAll(async () => {
    runtime = await startLocalRuntime(faultyModel, logs);
    client = new ArclightClient({
      modelName: 'faulty',
      local: true,
      localRuntimeUrl: runtime.url,
      commandTimeoutMs: 20_000,
      connectTimeoutMs: 20_000,
    });
    client.on('error', (error) => clientErrors.push(error));
  });

  afterAll(async () => {
    await client?.disconnect().catch(() => {});
    await runtime?.close();
    await new Promise((resolve) => setTimeout(resolve, 200));
  });

  it('reaches ready although session_started rejects and connected throws', async () => {
    await client.connect(undefined, { maxAttempts: 10 });
    expect(client.getStatus()).toBe('ready');
    // The hooks did run (and fail): the runtime logged both failures.
    await waitUntil(() => logs.some((r) => r.msg === 'model hook connected failed'), 10_000, 'the connected hook failure in the log');
    const text = logText(logs);
    expect(text).toContain('model hook session_started failed');
    expect(text).toContain('session_started hook rejected on purpose');
    expect(text).toContain('connected hook threw on purpose');
    // A healthy command works on the session whose hooks failed.
    expect(await client.sendCommand('echo', { value: 'hi' })).toEqual({ type: 'echoed', data: { value: 'hi' } });
  });

  it('a handler that throws → internal_error, without the detail', async () => {
    const error = await failureOf(client.sendCommand('boom', {}));
    expect(error.code).toBe('internal_error');
    expect(error.message).not.toContain(SECRET);
    expect(error.message).toContain('boom');
    // The detail is kept for the operator.
    expect(logText(logs)).toContain(SECRET);
  });

  it('a handler that rejects later → internal_error, without the detail', async () => {
    const error = await failureOf(client.sendCommand('reject_later', {}));
    expect(error.code).toBe('internal_error');
    expect(error.message).not.toContain(SECRET);
  });

  it('CommandError → its own code and message', async () => {
    const error = await failureOf(client.sendCommand('refuse', {}));
    expect(error.code).toBe('not_today');
    expect(error.message).toBe('nope');
    expect(error.field).toBeUndefined();
  });

  it('a reply that breaks its declared schema → internal_error', async () => {
    const error = await failureOf(client.sendCommand('bad_reply', {}));
    expect(error.code).toBe('internal_error');
    expect(error.message).not.toContain('not a number');
  });

  it('invalid params → invalid_params with field', async () => {
    const error = await failureOf(client.sendCommand('echo', { value: 42 }));
    expect(error.code).toBe('invalid_params');
    expect(error.field).toBe('/value');
  });

  it('a handler that never settles does not block other commands', async () => {
    const hanging = client.sendCommand('hang', {});
    hanging.catch(() => {}); // settles (connection_failed) when the client disconnects
    let settled = false;
    void hanging.then(
      () => (settled = true),
      () => (settled = true),
    );
    for (let i = 0; i < 3; i++) {
      expect(await client.sendCommand('echo', { value: `v${i}` })).toEqual({ type: 'echoed', data: { value: `v${i}` } });
    }
    expect(settled).toBe(false);
  });

  it('keeps serving: the client is still ready, a valid command works, /health is 200', async () => {
    expect(client.getStatus()).toBe('ready');
    expect(await client.sendCommand('echo', { value: 'still here' })).toEqual({ type: 'echoed', data: { value: 'still here' } });
    const health = await fetch(`${runtime.url}/health`);
    expect(health.status).toBe(200);
    expect(((await health.json()) as { state: string }).state).toBe('serving');
    // Command failures are per command: none surfaced as a client-level error.
    expect(clientErrors.map((e) => `${e.code}: ${e.message}`)).toEqual([]);
  });
});

describe('model faults: run() throws', () => {
  const logs: LogRecord[] = [];
  let runtime: Runtime;
  const clients: ArclightClient[] = [];
  let firstSession: string | undefined;
  /** What GET /sessions/{id} answered when asked the moment the client learnt the session ended. */
  let lookupAtEnd: Promise<{ status: number; text: string }> | undefined;

  const newClient = (): ArclightClient => {
    const client = new ArclightClient({
      modelName: 'crashing',
      local: true,
      localRuntimeUrl: runtime.url,
      commandTimeoutMs: 20_000,
      connectTimeoutMs: 20_000,
    });
    clients.push(client);
    return client;
  };

  beforeAll(async () => {
    runtime = await startLocalRuntime(createCrashingModel(1_500), logs);
  });

  afterAll(async () => {
    for (const client of clients) await client.disconnect().catch(() => {});
    await runtime?.close();
    await new Promise((resolve) => setTimeout(resolve, 200));
  });

  it('ends the session with reason model_error; the client gets sessionEnded', async () => {
    const first = newClient();
    const endedReasons: string[] = [];
    first.on('sessionEnded', (reason) => {
      endedReasons.push(reason);
      const id = firstSession;
      lookupAtEnd ??= fetch(`${runtime.url}/sessions/${id}`).then(async (r) => ({ status: r.status, text: await r.text() }));
    });
    await first.connect(undefined, { maxAttempts: 10 });
    firstSession = first.getSessionId()!;
    expect(firstSession).toBeTypeOf('string');

    await waitUntil(() => endedReasons.length > 0, 20_000, 'the sessionEnded event');
    expect(endedReasons).toEqual(['model_error']);
    await waitUntil(() => first.getStatus() === 'disconnected', 10_000, 'the client to disconnect');
    expect(logText(logs)).toContain('run() crashed on purpose');

    // Once the teardown is over, the ended session answers 410 with its reason.
    await waitUntil(() => runtime.sessions.current === undefined, 15_000, 'the session teardown to finish');
    const gone = await fetch(`${runtime.url}/sessions/${firstSession}`);
    const goneText = await gone.text();
    expect(gone.status, goneText).toBe(410);
    const body = JSON.parse(goneText) as { code: string; message: string };
    expect(body.code).toBe('session_ended');
    expect(body.message).toContain('model_error');
  });

  it('the ended session id answers 410 session_ended as soon as its clients are told, not 404', async () => {
    expect(lookupAtEnd, 'the first test captured the lookup').toBeDefined();
    const { status, text } = await lookupAtEnd!;
    expect(status, `GET /sessions/${firstSession} when the client got session_ended → ${status} ${text}`).toBe(410);
    expect((JSON.parse(text) as { code: string }).code).toBe('session_ended');
  });

  it('a new session starts afterwards and runs normally', async () => {
    // The runtime is healthy and available again.
    await waitUntil(
      async () => {
        const health = (await (await fetch(`${runtime.url}/health`)).json()) as { state: string };
        return health.state === 'available';
      },
      15_000,
      'state available',
    );

    const second = newClient();
    const secondEnded: string[] = [];
    second.on('sessionEnded', (reason) => secondEnded.push(reason));
    await second.connect(undefined, { maxAttempts: 10 });
    expect(second.getStatus()).toBe('ready');
    expect(second.getSessionId()).not.toBe(firstSession);
    expect(await second.sendCommand('echo', { n: '1' })).toEqual({ type: 'echoed', data: { n: '1' } });
    // The second session's run() does not crash: still up well past the first one's crash delay.
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    expect(secondEnded).toEqual([]);
    expect(second.getStatus()).toBe('ready');
    expect((await fetch(`${runtime.url}/health`)).status).toBe(200);
    await second.disconnect();
  });
});
