/**
 * Hosted mode end to end, all real: a coordinator, a runtime in hosted mode serving `pattern`
 * that registers itself, and our Node client (wrtc) with a token minted by a server holding the
 * API key. The client creates a session through the coordinator, which places it on the runtime
 * and relays the transport calls; video arrives; the runtime's first ready client makes the
 * session `ready` and starts the meter; the client's disconnect ends the session on both sides and
 * stops billing. The runtime refuses clients that go around the coordinator.
 *
 * Which engine runs what (issue 20 part 7; docs/testing.md "Which engine runs what"). Every case
 * here waits out real seconds of billing, so running all of them twice would add ~40 s:
 *   - SQLite and PostgreSQL: the cases whose writes come from the runtime's own reports, racing the
 *     client, housekeeping and the meter, and end in the ledger — streaming with billing from ready
 *     to the client's DELETE and the balance charged; the runtime ending a session at its maximum
 *     duration by itself (its `ended` report, billed exactly to the maximum); an account running
 *     dry (the meter's pass ends the session, the balance reaches exactly 0, then 402).
 *   - SQLite only: the rest of the main suite — its database writes are tested on both engines
 *     elsewhere (the end after a reconnect window is the runtime's `ended` report, as in the
 *     maximum-duration case above, and the window's value is reconnect-window.test.ts's; adopters
 *     and bindings: sessions.test.ts, tokens.test.ts; the maximum duration ended by housekeeping
 *     and a late end report: billing.test.ts; rotating a key under a running session:
 *     platform-keys.test.ts; draining, and a runtime closing on an open session:
 *     runtimes.test.ts and drain.test.ts), or it is the runtime's alone (uploads, refusals,
 *     repeated starts) — and the clips and --public-url suites, which relay the runtime's
 *     recordings and sign under a configured origin.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArclightClient } from '../../client/node.ts';
import type { Coordinator } from '../../coordinator/index.ts';
import pattern from '../../models/examples/pattern/index.ts';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import { ENGINES } from './storage-engines.ts';
import { startHostedStack, type HostedStack } from '../support/hosted-stack.ts';
import { VideoProbe, waitUntil } from '../support/video-probe.ts';

/** The coordinator's reconnect window here (default 30 s), short so the test sees it pass. */
const RECONNECT_WINDOW_SECONDS = 3;

describe.each(ENGINES)('hosted mode on %s: client → coordinator → runtime', (engine) => {
  /** A case this file runs on SQLite only (the header says why): on PostgreSQL it is not registered. */
  const sqliteOnly = (name: string, fn: () => Promise<void>, timeout?: number): void => {
    if (engine === 'sqlite') it(name, fn, timeout);
  };
  let stack: HostedStack;
  let coordinator: Coordinator;
  let runtime: Runtime;
  let accountId: string;
  const probes: VideoProbe[] = [];
  const mintToken = (bind?: readonly string[]) => stack.mintToken(bind);

  beforeAll(async () => {
    stack = await startHostedStack({ runtimeId: 'gpu-0', reconnectWindowSeconds: RECONNECT_WINDOW_SECONDS, engine });
    ({ coordinator, runtime, accountId } = stack);
  }, 60_000);
  afterAll(async () => {
    for (const probe of probes) probe.stop();
    await stack?.close();
  });

  it('streams through a placed session, bills from ready, and ends on both sides at disconnect', async () => {
    const client = new ArclightClient({ modelName: 'pattern', apiUrl: coordinator.url });
    const probe = new Promise<VideoProbe>((resolve) => {
      client.on('trackReceived', (name, track) => {
        if (name === 'main_video' && track.kind === 'video') {
          const p = new VideoProbe(track);
          probes.push(p);
          resolve(p);
        }
      });
    });
    const statuses: string[] = [];
    client.on('statusChanged', (status) => statuses.push(status));
    await client.connect(await mintToken());
    const sessionId = client.getSessionId()!;
    expect(runtime.sessions.current?.id).toBe(sessionId); // the coordinator's id, on the runtime
    const video = await probe;
    await waitUntil(() => video.frames >= 10, 20_000, 'ten frames through the hosted path');

    await waitUntil(async () => (await coordinator.sessions.get(sessionId))?.status === 'ready', 10_000, 'the runtime to report ready');
    const session = (await coordinator.sessions.get(sessionId))!;
    expect(session.runtime_id).toBe('gpu-0');
    expect(session.ready_at).not.toBeNull();
    // Commands flow over the relayed connection's data channel.
    expect((await client.sendCommand('set_color', { color: '#00ff00' }))?.type).toBe('color_changed');

    // Billed while it runs: up to the runtime's last heartbeat (every second here), flushed by housekeeping.
    await waitUntil(
      async () => {
        await coordinator.housekeeping();
        return Number((await coordinator.sessions.get(sessionId))!.billed_seconds) >= 2;
      },
      10_000,
      'the meter to bill two seconds of the running session',
    );

    await client.disconnect(); // the creator ends its session
    // What the app sees in hosted mode (docs/coordinator.md "Statuses"): `connecting` until the
    // coordinator admitted the session, `waiting` while a GPU is found and WebRTC comes up.
    expect(statuses).toEqual(['connecting', 'waiting', 'ready', 'disconnected']);
    await waitUntil(() => runtime.sessions.current === undefined, 10_000, 'the runtime to end the session');
    const ended = (await coordinator.sessions.get(sessionId))!;
    expect(ended.status).toBe('ended');
    const billedAtEnd = Number(ended.billed_seconds);
    expect(billedAtEnd).toBe(Math.floor((ended.ended_at! - ended.ready_at!) / 1000));
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    await coordinator.housekeeping();
    expect(Number((await coordinator.sessions.get(sessionId))!.billed_seconds)).toBe(billedAtEnd); // the meter stopped
    expect((await coordinator.ledger.balance(accountId)).credits).toBe(100_000 - billedAtEnd * 5);
  }, 90_000);

  sqliteOnly(
    'a recoverable disconnect keeps the session, its GPU and its meter for the reconnect window; then it ends and billing stops there',
    async () => {
      const client = new ArclightClient({ modelName: 'pattern', apiUrl: coordinator.url });
      await client.connect(await mintToken());
      const sessionId = client.getSessionId()!;
      await waitUntil(async () => (await coordinator.sessions.get(sessionId))?.status === 'ready', 10_000, 'the session to be ready');
      const readyAt = (await coordinator.sessions.get(sessionId))!.ready_at!;

      await client.disconnect(true); // recoverable: the network "drops"
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      expect((await coordinator.sessions.get(sessionId))!.status).toBe('ready'); // held, and billed
      expect(runtime.sessions.current?.id).toBe(sessionId);
      await client.reconnect();
      expect(client.getStatus()).toBe('ready');
      expect(client.getSessionId()).toBe(sessionId);

      const leavingAt = Date.now();
      await client.disconnect(true);
      const leftAt = Date.now();
      await waitUntil(() => runtime.sessions.current === undefined, 15_000, 'the reconnect window to pass');
      await waitUntil(
        async () => (await coordinator.sessions.get(sessionId))?.status === 'ended',
        5_000,
        'the coordinator to hear the end',
      );
      const ended = (await coordinator.sessions.get(sessionId))!;
      // Ended one window after the client left (not at the drop), and billed until then. The window
      // opens somewhere between the call and its return (a loaded machine can take a while to
      // return): the lower bound counts from the call.
      expect(ended.ended_at! - leavingAt).toBeGreaterThanOrEqual(RECONNECT_WINDOW_SECONDS * 1000 - 500);
      expect(ended.ended_at! - leftAt).toBeLessThan(RECONNECT_WINDOW_SECONDS * 1000 + 4_000);
      expect(Number(ended.billed_seconds)).toBe(Math.floor((ended.ended_at! - readyAt) / 1000));
      await new Promise((resolve) => setTimeout(resolve, 1_100));
      await coordinator.housekeeping();
      expect(Number((await coordinator.sessions.get(sessionId))!.billed_seconds)).toBe(Math.floor((ended.ended_at! - readyAt) / 1000));
    },
    60_000,
  );

  sqliteOnly(
    'a shared session: an adopter leaving changes nothing (session, GPU, meter); the creator leaving ends it',
    async () => {
      const creator = new ArclightClient({ modelName: 'pattern', apiUrl: coordinator.url });
      await creator.connect(await mintToken());
      const sessionId = creator.getSessionId()!;
      await waitUntil(async () => (await coordinator.sessions.get(sessionId))?.status === 'ready', 10_000, 'the session to be ready');
      const adopter = new ArclightClient({ modelName: 'pattern', apiUrl: coordinator.url });
      await adopter.connect(await mintToken([sessionId]), { sessionId });
      expect(adopter.getStatus()).toBe('ready');
      await adopter.disconnect(); // not recoverable — but an adopter's leaving ends nothing
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      await coordinator.housekeeping();
      const running = (await coordinator.sessions.get(sessionId))!;
      expect(running.status).toBe('ready');
      expect(runtime.sessions.current?.id).toBe(sessionId);
      // The meter runs on (up to the runtime's last heartbeat, every second here).
      await waitUntil(
        async () => {
          await coordinator.housekeeping();
          return Number((await coordinator.sessions.get(sessionId))!.billed_seconds) >= 1;
        },
        10_000,
        'the meter to bill the shared session on',
      );
      expect((await creator.sendCommand('set_color', { color: '#0000ff' }))?.type).toBe('color_changed');

      await creator.disconnect();
      const ended = (await coordinator.sessions.get(sessionId))!;
      expect(ended.status).toBe('ended');
      await waitUntil(() => runtime.sessions.current === undefined, 10_000, 'the runtime to end the session');
      await new Promise((resolve) => setTimeout(resolve, 1_100));
      await coordinator.housekeeping();
      expect(Number((await coordinator.sessions.get(sessionId))!.billed_seconds)).toBe(
        Math.floor((ended.ended_at! - ended.ready_at!) / 1000),
      );
    },
    60_000,
  );

  sqliteOnly(
    'the maximum duration ends the session, and every client hears why',
    async () => {
      const minted = await fetch(`${coordinator.url}/tokens`, {
        method: 'POST',
        headers: { 'Service-API-Key': stack.key, 'content-type': 'application/json' },
        body: JSON.stringify({
          authorization_details: [
            { type: 'session', resources: { models: { match: ['pattern'] } }, constraints: { max_session_duration_seconds: 2 } },
          ],
        }),
      });
      const { token } = (await minted.json()) as { token: string };
      const client = new ArclightClient({ modelName: 'pattern', apiUrl: coordinator.url });
      const heard = new Promise<string>((resolve) => client.on('sessionEnded', resolve));
      await client.connect(token);
      const sessionId = client.getSessionId()!;
      await waitUntil(async () => (await coordinator.sessions.get(sessionId))?.status === 'ready', 10_000, 'the session to be ready');
      await new Promise((resolve) => setTimeout(resolve, 2_200));
      await coordinator.housekeeping(); // the timer's pass (off in this stack): ends it at ready + 2 s
      expect(await heard).toMatch(/maximum duration \(2 s\)/);
      const ended = (await coordinator.sessions.get(sessionId))!;
      expect(ended.ended_at! - ended.ready_at!).toBe(2_000);
      expect(Number(ended.billed_seconds)).toBe(2);
      await waitUntil(() => client.getStatus() === 'disconnected', 5_000, 'the client to disconnect');
    },
    60_000,
  );

  it('the runtime ends a session at its maximum duration by itself (no housekeeping), every client hears why, and the coordinator records it', async () => {
    const MAX_SECONDS = 2;
    const minted = await fetch(`${coordinator.url}/tokens`, {
      method: 'POST',
      headers: { 'Service-API-Key': stack.key, 'content-type': 'application/json' },
      body: JSON.stringify({
        authorization_details: [
          { type: 'session', resources: { models: { match: ['pattern'] } }, constraints: { max_session_duration_seconds: MAX_SECONDS } },
        ],
      }),
    });
    const { token } = (await minted.json()) as { token: string };
    const creator = new ArclightClient({ modelName: 'pattern', apiUrl: coordinator.url });
    const adopter = new ArclightClient({ modelName: 'pattern', apiUrl: coordinator.url });
    // When each client heard the end (this process's clock, which is also the coordinator's).
    const hearing = (client: ArclightClient) =>
      new Promise<{ reason: string; at: number }>((resolve) => client.on('sessionEnded', (reason) => resolve({ reason, at: Date.now() })));
    const heard = [hearing(creator), hearing(adopter)];
    await creator.connect(token);
    const sessionId = creator.getSessionId()!;
    await waitUntil(async () => (await coordinator.sessions.get(sessionId))?.status === 'ready', 10_000, 'the session to be ready');
    await adopter.connect(await mintToken([sessionId]), { sessionId });
    const readyAt = (await coordinator.sessions.get(sessionId))!.ready_at!;
    // This stack's housekeeping timer is off (meterFlushMs: 0) and nothing here runs a pass: the
    // coordinator alone would never end the session. Bound: the deadline plus generous slack for
    // the runtime's report, the notice and a loaded machine.
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>(
      (resolve) => (timer = setTimeout(() => resolve('late'), readyAt + MAX_SECONDS * 1000 + 8_000 - Date.now())),
    );
    const ends = await Promise.race([Promise.all(heard), late]);
    clearTimeout(timer);
    if (ends === 'late') throw new Error('the clients did not both hear the end within 8 s of the deadline');
    for (const { reason, at } of ends) {
      expect(reason).toBe(`The session reached its maximum duration (${MAX_SECONDS} s).`); // the coordinator's words
      expect(at - readyAt).toBeGreaterThanOrEqual(MAX_SECONDS * 1000);
      expect(at - readyAt).toBeLessThan(MAX_SECONDS * 1000 + 8_000);
    }
    await waitUntil(() => runtime.sessions.current === undefined, 10_000, 'the runtime to free its slot');
    // The runtime told the coordinator, which records the end as its own housekeeping would have.
    await waitUntil(async () => (await coordinator.sessions.get(sessionId))?.status === 'ended', 5_000, 'the coordinator to hear the end');
    const ended = (await coordinator.sessions.get(sessionId))!;
    expect(ended.end_reason).toBe(`The session reached its maximum duration (${MAX_SECONDS} s).`);
    expect(ended.ended_at! - ended.ready_at!).toBe(MAX_SECONDS * 1000);
    expect(Number(ended.billed_seconds)).toBe(MAX_SECONDS);
    await waitUntil(
      () => creator.getStatus() === 'disconnected' && adopter.getStatus() === 'disconnected',
      5_000,
      'both clients to disconnect',
    );
  }, 60_000);

  sqliteOnly(
    'uploads through the coordinator: presigned URLs point at it, the bytes reach the runtime and come back',
    async () => {
      const client = new ArclightClient({ modelName: 'pattern', apiUrl: coordinator.url });
      await client.connect(await mintToken());
      const sessionId = client.getSessionId()!;
      await waitUntil(async () => (await coordinator.sessions.get(sessionId))?.status === 'ready', 10_000, 'the session to be ready');
      const bytes = new Uint8Array(300_000).map((_, i) => (i * 31) % 251);
      const ref = await client.uploadFile(new Blob([bytes], { type: 'application/octet-stream' }), { name: 'weights.bin' });
      expect(new URL(ref.downloadUrl!).origin).toBe(new URL(coordinator.url).origin); // never the runtime's address
      const back = await fetch(ref.downloadUrl!);
      expect(back.status).toBe(200);
      expect(Buffer.from(await back.arrayBuffer()).equals(Buffer.from(bytes))).toBe(true);
      // Reserving needs the session's token; the signed URLs need nothing else, and a tampered one fails.
      expect((await fetch(`${coordinator.url}/sessions/${sessionId}/uploads`, { method: 'POST', body: '{}' })).status).toBe(401);
      const tampered = new URL(ref.downloadUrl!);
      tampered.searchParams.set('signature', '0'.repeat(64));
      expect((await fetch(tampered)).status).toBe(403);
      await client.disconnect();
    },
    60_000,
  );

  sqliteOnly('the runtime refuses local-mode sessions and transport calls without the runtime secret', async () => {
    expect((await fetch(`${runtime.url}/start_session`, { method: 'POST' })).status).toBe(403);
    const transport = await fetch(`${runtime.url}/sessions/anything/transport/webrtc/ice_servers`);
    expect(transport.status).toBe(401);
    expect((await fetch(`${runtime.url}/hosted/sessions`, { method: 'POST', body: '{}' })).status).toBe(401);
    // With the secret, a maximum duration it could not enforce is refused, and nothing opens.
    const refused = await fetch(`${runtime.url}/hosted/sessions`, {
      method: 'POST',
      headers: { 'Arclight-Runtime-Secret': 'secret-gpu-0', 'content-type': 'application/json' },
      body: JSON.stringify({ session_id: 'not-placed', max_duration_seconds: 'soon' }),
    });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { field?: string }).field).toBe('/max_duration_seconds');
    expect(runtime.sessions.current).toBeUndefined();
  });
  sqliteOnly('a repeated start of one session answers as the first did, and an ended session is not opened again', async () => {
    const start = () =>
      fetch(`${runtime.url}/hosted/sessions`, {
        method: 'POST',
        headers: { 'Arclight-Runtime-Secret': 'secret-gpu-0', 'content-type': 'application/json' },
        body: JSON.stringify({ session_id: 'started-twice' }),
      });
    // Two at once (a retry racing the first while the model sets up), then one more afterwards.
    const answers = await Promise.all([start(), start()]);
    const first = runtime.sessions.current!;
    answers.push(await start());
    const bodies = await Promise.all(answers.map((r) => r.json() as Promise<{ session_id: string }>));
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(bodies.map((b) => b.session_id)).toEqual(['started-twice', 'started-twice', 'started-twice']);
    // The same session throughout: none of the repeats replaced it.
    expect(runtime.sessions.current).toBe(first);
    expect(first.id).toBe('started-twice');
    expect(first.ended).toBe(false);
    const ended = await fetch(`${runtime.url}/hosted/sessions/started-twice`, {
      method: 'DELETE',
      headers: { 'Arclight-Runtime-Secret': 'secret-gpu-0' },
    });
    expect(ended.status).toBe(200);
    // A late duplicate start after the end is refused rather than opening the session afresh.
    const late = await start();
    expect(late.status).toBe(410);
    expect(((await late.json()) as { code: string }).code).toBe('session_ended');
    expect(runtime.sessions.current).toBeUndefined();
    // Ended before its start arrived (a client ended it while it was being placed): the late
    // start is refused too, so no session opens that nobody would end.
    const early = await fetch(`${runtime.url}/hosted/sessions/ended-first`, {
      method: 'DELETE',
      headers: { 'Arclight-Runtime-Secret': 'secret-gpu-0' },
    });
    expect(early.status).toBe(410); // remembered as ended from now on (the coordinator reads 404 and 410 alike: let go)
    const startedLate = await fetch(`${runtime.url}/hosted/sessions`, {
      method: 'POST',
      headers: { 'Arclight-Runtime-Secret': 'secret-gpu-0', 'content-type': 'application/json' },
      body: JSON.stringify({ session_id: 'ended-first' }),
    });
    expect(startedLate.status).toBe(410);
    expect(runtime.sessions.current).toBeUndefined();
  });

  /** Another account on this coordinator, with its own API key (so rotating it leaves `stack.key` alone). */
  const otherAccount = async (name: string, credits: number) => {
    const account = await coordinator.accounts.create(name);
    await coordinator.ledger.grantPromotional(account.id, credits);
    const issued = await coordinator.apiKeys.create(account.id);
    const mint = async (key: string) =>
      fetch(`${coordinator.url}/tokens`, {
        method: 'POST',
        headers: { 'Service-API-Key': key, 'content-type': 'application/json' },
        body: JSON.stringify({ authorization_details: [{ type: 'session', resources: { models: { match: ['pattern'] } } }] }),
      });
    return { id: account.id, keyId: issued.record.id, key: issued.key, mint };
  };

  sqliteOnly(
    'rotating the API key leaves a live session alone: it stays ready, keeps billing, and its token still reads and ends it',
    async () => {
      const acme = await otherAccount('Rotating', 100_000);
      const { token } = (await (await acme.mint(acme.key)).json()) as { token: string };
      const client = new ArclightClient({ modelName: 'pattern', apiUrl: coordinator.url });
      await client.connect(token);
      const sessionId = client.getSessionId()!;
      await waitUntil(async () => (await coordinator.sessions.get(sessionId))?.status === 'ready', 10_000, 'the session to be ready');

      const rotated = await coordinator.apiKeys.rotate(acme.keyId);
      expect((await acme.mint(acme.key)).status).toBe(401); // the old key is revoked at once
      expect((await acme.mint(rotated.key)).status).toBe(200);

      const read = await fetch(`${coordinator.url}/sessions/${sessionId}`, { headers: { authorization: `Bearer ${token}` } });
      expect(read.status).toBe(200);
      expect(((await read.json()) as { status: string }).status).toBe('ready');
      expect((await client.sendCommand('set_color', { color: '#ff0000' }))?.type).toBe('color_changed');
      // Still billing after the rotation. Polled: charges may trail the clock (by up to a runtime
      // heartbeat), so a fixed sleep would test the meter's lag rather than the rotation.
      const billed = async () => {
        await coordinator.housekeeping();
        return Number((await coordinator.sessions.get(sessionId))!.billed_seconds);
      };
      const billedAtRotation = await billed();
      await waitUntil(async () => (await billed()) > billedAtRotation, 15_000, 'the meter to charge the session after the rotation');
      expect((await coordinator.sessions.get(sessionId))!.status).toBe('ready');

      const ended = await fetch(`${coordinator.url}/sessions/${sessionId}`, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${token}` },
      });
      expect(ended.status).toBe(200);
      expect(((await ended.json()) as { state: string }).state).toBe('CLOSED');
      await waitUntil(() => runtime.sessions.current === undefined, 10_000, 'the runtime to end the session');
      await client.disconnect();
    },
    60_000,
  );

  it('an account that runs dry: housekeeping ends its running session, and the client hears why', async () => {
    const dry = await otherAccount('Dry', 10); // two seconds of pattern at 5 credits/s
    const { token } = (await (await dry.mint(dry.key)).json()) as { token: string };
    const client = new ArclightClient({ modelName: 'pattern', apiUrl: coordinator.url });
    const heard = new Promise<string>((resolve) => client.on('sessionEnded', resolve));
    await client.connect(token);
    const sessionId = client.getSessionId()!;
    await waitUntil(async () => (await coordinator.sessions.get(sessionId))?.status === 'ready', 10_000, 'the session to be ready');
    // The timer's pass (off in this stack), until the meter has charged past the 10 credits
    // (charges may trail the clock by up to a runtime heartbeat).
    await waitUntil(
      async () => {
        await coordinator.housekeeping();
        return (await coordinator.sessions.get(sessionId))!.status === 'ended';
      },
      20_000,
      "the meter to end the dry account's session",
    );
    expect(await heard).toBe('The account ran out of credits.');
    const ended = (await coordinator.sessions.get(sessionId))!;
    expect(ended).toMatchObject({ status: 'ended', end_reason: 'The account ran out of credits.' });
    expect((await coordinator.ledger.balance(dry.id)).credits).toBe(0);
    await waitUntil(() => client.getStatus() === 'disconnected', 5_000, 'the client to disconnect');
    await waitUntil(() => runtime.sessions.current === undefined, 10_000, 'the runtime to end the session');
    // And the account cannot start another until it tops up.
    const refused = await fetch(`${coordinator.url}/sessions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: { name: 'pattern' } }),
    });
    expect(refused.status).toBe(402);
    expect(((await refused.json()) as { code: string }).code).toBe('insufficient_credits');
  }, 60_000);

  // Last: the runtime stays draining afterwards.
  sqliteOnly(
    'drains on request (SIGTERM in the CLI): the coordinator hears at once, the open session runs to its end',
    async () => {
      const client = new ArclightClient({ modelName: 'pattern', apiUrl: coordinator.url });
      await client.connect(await mintToken());
      const sessionId = client.getSessionId()!;
      let drained = false;
      const draining = runtime.drain(30_000).then(() => (drained = true));
      await waitUntil(
        async () => (await coordinator.registry.get('gpu-0'))?.draining === 1,
        5_000,
        'the coordinator to see the runtime draining',
      );
      // A new session is not placed on a draining runtime.
      const waiting = await fetch(`${coordinator.url}/sessions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${await mintToken()}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: { name: 'pattern' } }),
      });
      expect(((await waiting.json()) as { capabilities?: unknown }).capabilities).toBeUndefined();
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(drained).toBe(false); // the open session is still running
      expect(runtime.sessions.current?.id).toBe(sessionId);
      await client.disconnect();
      await draining;
      expect(runtime.sessions.current).toBeUndefined();
    },
    60_000,
  );
  // After the drain test: gpu-0 takes nothing new, so this session lands on a second runtime.
  sqliteOnly(
    'a runtime that closes with a session open reports its end at once (billing stops then, not a heartbeat timeout later)',
    async () => {
      const second = await startRuntime({
        model: pattern as never,
        port: 0,
        host: '127.0.0.1',
        ice: { hostAddresses: ['127.0.0.1'] },
        playground: false,
        hosted: { coordinatorUrl: coordinator.url, secret: 'secret-gpu-0', runtimeId: 'gpu-1' },
      });
      try {
        await waitUntil(async () => (await coordinator.registry.get('gpu-1')) !== undefined, 20_000, 'the second runtime to register');
        const client = new ArclightClient({ modelName: 'pattern', apiUrl: coordinator.url });
        await client.connect(await mintToken());
        const sessionId = client.getSessionId()!;
        await waitUntil(async () => (await coordinator.sessions.get(sessionId))?.status === 'ready', 10_000, 'the session to be ready');
        const closing = Date.now();
        await second.close();
        const closedAt = Date.now();
        const ended = (await coordinator.sessions.get(sessionId))!;
        expect(ended.status).toBe('ended');
        // Ended by the close, and at the coordinator before close() returned: bounded by what
        // happened rather than by a fixed 3 s, which a loaded machine's close can outlast.
        expect(ended.ended_at!).toBeGreaterThanOrEqual(closing);
        expect(ended.ended_at!).toBeLessThanOrEqual(closedAt);
        await client.disconnect().catch(() => undefined);
      } finally {
        await second.close();
      }
    },
    60_000,
  );
});

describe('hosted mode: clips through the coordinator', () => {
  let stack: HostedStack;
  beforeAll(async () => {
    stack = await startHostedStack({ runtimeId: 'gpu-clips', recording: true });
  });
  afterAll(async () => stack?.close());

  it('clip URLs point at the coordinator, which relays the playlist and segments from the runtime', async () => {
    const client = new ArclightClient({ modelName: 'pattern', apiUrl: stack.coordinator.url });
    await client.connect(await stack.mintToken());
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    const clip = await client.requestClip(2);
    expect(new URL(clip.playlistUrl).origin).toBe(new URL(stack.coordinator.url).origin);
    const playlist = await fetch(clip.playlistUrl);
    expect(playlist.status).toBe(200);
    const text = await playlist.text();
    const init = new URL(/#EXT-X-MAP:URI="([^"]+)"/.exec(text)![1]!, clip.playlistUrl);
    expect(init.origin).toBe(new URL(stack.coordinator.url).origin);
    const initBytes = Buffer.from(await (await fetch(init)).arrayBuffer());
    expect(initBytes.subarray(4, 8).toString()).toBe('ftyp');
    const segment = new URL(
      text.split('\n').find((line) => line.startsWith('seg-') || line.includes('.m4s'))!,
      clip.playlistUrl,
    );
    const segmentBytes = Buffer.from(await (await fetch(segment)).arrayBuffer());
    expect(segmentBytes.subarray(4, 8).toString()).toBe('moof');
    await client.disconnect();
  }, 60_000);
});

describe('hosted mode behind a load balancer (--public-url)', () => {
  // A documentation address: only compared, never requested.
  const PUBLIC = 'https://arclight.example.test';
  let stack: HostedStack;
  beforeAll(async () => {
    stack = await startHostedStack({ runtimeId: 'gpu-lb', publicUrl: PUBLIC });
  }, 60_000);
  afterAll(async () => {
    await stack?.close();
  });

  it('signs presigned upload URLs under the public URL, not the address the request came to', async () => {
    const token = await stack.mintToken();
    const client = new ArclightClient({ modelName: 'pattern', apiUrl: stack.coordinator.url });
    await client.connect(token);
    const sessionId = client.getSessionId()!;
    await waitUntil(async () => (await stack.coordinator.sessions.get(sessionId))?.status === 'ready', 10_000, 'the session to be ready');
    // The reservation only: the PUT would go to the public address, which does not exist here.
    const reserved = await fetch(`${stack.coordinator.url}/sessions/${sessionId}/uploads`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'a.bin', size: 3, mime_type: 'application/octet-stream' }),
    });
    expect(reserved.status).toBe(201);
    const body = (await reserved.json()) as { presigned_url: string; download_url: string };
    expect(new URL(body.presigned_url).origin).toBe(PUBLIC);
    expect(new URL(body.download_url).origin).toBe(PUBLIC);
    expect(new URL(body.presigned_url).pathname).toMatch(new RegExp(`^/sessions/${sessionId}/uploads/`));
    await client.disconnect();
  }, 60_000);
});
