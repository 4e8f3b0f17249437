/**
 * Media reachability, without a browser (the relay itself: turn-relay.browser.test.ts):
 *
 *  - `ice.turn`: GET .../ice_servers returns the static servers plus a TURN entry whose
 *    credential is minted per request (`<expiry>:<session id>`, expiry = now + ttl) — and a real
 *    coturn (test/support/coturn.ts, on 127.0.0.1) grants a relay for it, while it refuses an
 *    expired or foreign one. The shared secret appears in no response of the runtime.
 *  - The same body reaches a client through the coordinator's transport relay, unchanged.
 *  - `ice.portRange` + `ice.publicAddress`: every candidate of an answer uses a port of the
 *    range, and each host candidate is offered again at the public address (203.0.113.7, a
 *    documentation address: only the SDP is read; nothing is ever sent there — the client peer
 *    never applies the answer).
 *
 * Every server listens on 127.0.0.1 only.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RTCPeerConnection } from 'werift';
import { startCoordinator, type Coordinator } from '../../coordinator/index.ts';
import pattern from '../../models/examples/pattern/index.ts';
import type { SessionResponse } from '../../protocol/session.ts';
import type { IceServersResponse, RegisterConnectionResponse } from '../../protocol/transport.ts';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import { createLogger } from '../../server-kit/log.ts';
import { turnCredential } from '../../runtime/transport/signalling/turn-credentials.ts';
import { freshDatabase } from '../coordinator/storage-engines.ts';
import { startCoturn, tryAllocate, type CoturnServer } from '../support/coturn.ts';
import { waitUntil } from '../support/video-probe.ts';

const LOOPBACK = '127.0.0.1';
const PUBLIC_IP = '203.0.113.7';
const TTL_SECONDS = 900;
/** A range per test process, so parallel files never compete for it. */
const PORT_BASE = 41_000 + (process.pid % 200) * 20;
const PORT_RANGE: [number, number] = [PORT_BASE, PORT_BASE + 19];

let coturn: CoturnServer;
let runtime: Runtime;
const STATIC_SERVER = { uris: ['stun:stun.example.invalid:3478'] };

beforeAll(async () => {
  coturn = await startCoturn({ address: LOOPBACK, allowedPeers: [LOOPBACK] });
  runtime = await startRuntime({
    model: pattern as never,
    port: 0,
    host: LOOPBACK,
    playground: false,
    logger: createLogger({ test: 'ice-reachability' }, 'warn'),
    ice: {
      hostAddresses: [LOOPBACK],
      portRange: PORT_RANGE,
      publicAddress: PUBLIC_IP,
      turn: { urls: [coturn.url], secret: coturn.secret, ttlSeconds: TTL_SECONDS },
    },
  });
}, 60_000);

afterAll(async () => {
  await runtime?.close();
  await coturn?.stop();
});

async function startSession(url: string): Promise<string> {
  const response = await fetch(`${url}/start_session`, { method: 'POST', body: '{}' });
  expect(response.status).toBe(200);
  return ((await response.json()) as SessionResponse).session_id;
}

async function stopSession(url: string, sessionId: string): Promise<void> {
  await fetch(`${url}/stop_session`, { method: 'POST', body: JSON.stringify({ session_id: sessionId }) });
}

describe('ice_servers with ice.turn', () => {
  it('hands out a fresh TURN credential per request that a real coturn accepts, and never the secret', async () => {
    const sessionId = await startSession(runtime.url);
    try {
      const before = Math.floor(Date.now() / 1000);
      const response = await fetch(`${runtime.url}/sessions/${sessionId}/transport/webrtc/ice_servers`);
      const after = Math.floor(Date.now() / 1000);
      expect(response.status).toBe(200);
      expect(response.headers.get('cache-control')).toBe('no-store');
      const text = await response.text();
      expect(text).not.toContain(coturn.secret);
      for (const [, value] of response.headers) expect(value).not.toContain(coturn.secret);

      const body = JSON.parse(text) as IceServersResponse;
      expect(body.ice_servers).toHaveLength(1);
      const turn = body.ice_servers[0]!;
      expect(turn.uris).toEqual([coturn.url]);
      const { username, password } = turn.credentials!;
      const [expiry, id] = username.split(':');
      expect(id).toBe(sessionId);
      expect(Number(expiry)).toBeGreaterThanOrEqual(before + TTL_SECONDS);
      expect(Number(expiry)).toBeLessThanOrEqual(after + TTL_SECONDS);
      expect(password).toBe(turnCredential(coturn.secret, Number(expiry), sessionId).password);

      // coturn recomputes the HMAC with its static-auth-secret and grants a relay on its range —
      // to the runtime's address only (the test server's allow list; no packet goes to the others).
      const granted = await tryAllocate(coturn.address, coturn.port, username, password, [LOOPBACK, '127.0.0.2', '192.0.2.55']);
      expect(granted, coturn.log().slice(-2000)).toMatchObject({
        ok: true,
        relayed: { address: LOOPBACK },
        permissions: { [LOOPBACK]: 200, '127.0.0.2': 403, '192.0.2.55': 403 },
      });
      if (granted.ok) {
        expect(granted.relayed.port).toBeGreaterThanOrEqual(coturn.relayPorts[0]);
        expect(granted.relayed.port).toBeLessThanOrEqual(coturn.relayPorts[1]);
      }
      // ...and refuses what the scheme says it must: a tampered password, a past expiry.
      // (Its first character replaced by another: a password that already began with "x" once
      // came back unchanged from `x${password.slice(1)}` — 1 run in 64.)
      const tampered = `${password.startsWith('x') ? 'y' : 'x'}${password.slice(1)}`;
      expect(await tryAllocate(coturn.address, coturn.port, username, tampered)).toMatchObject({ ok: false, code: 401 });
      const expired = turnCredential(coturn.secret, before - 1, sessionId);
      expect(await tryAllocate(coturn.address, coturn.port, expired.username, expired.password)).toMatchObject({ ok: false, code: 401 });

      // Nothing else the runtime serves carries the secret either.
      for (const path of [`/sessions/${sessionId}`, '/session', '/capabilities', '/schema', '/metrics', '/health']) {
        const other = await fetch(`${runtime.url}${path}`);
        expect(await other.text(), path).not.toContain(coturn.secret);
      }
    } finally {
      await stopSession(runtime.url, sessionId);
    }
  });

  it('adds the TURN entry after the static servers', async () => {
    const withStatic = await startRuntime({
      model: pattern as never,
      port: 0,
      host: LOOPBACK,
      playground: false,
      logger: createLogger({ test: 'ice-reachability' }, 'warn'),
      // Static servers go to the runtime's own peers too; none is created in this test.
      ice: { hostAddresses: [LOOPBACK], servers: [STATIC_SERVER], turn: { urls: [coturn.url], secret: coturn.secret } },
    });
    try {
      const sessionId = await startSession(withStatic.url);
      const body = (await (
        await fetch(`${withStatic.url}/sessions/${sessionId}/transport/webrtc/ice_servers`)
      ).json()) as IceServersResponse;
      expect(body.ice_servers[0]).toEqual(STATIC_SERVER);
      expect(body.ice_servers[1]!.uris).toEqual([coturn.url]);
      const expiry = Number(body.ice_servers[1]!.credentials!.username.split(':')[0]);
      expect(expiry - Date.now() / 1000).toBeGreaterThan(3600 - 5); // the default ttl: one hour
      expect(expiry - Date.now() / 1000).toBeLessThanOrEqual(3600);
    } finally {
      await withStatic.close();
    }
  });

  it('refuses to start with a TURN configuration that cannot work', async () => {
    await expect(
      startRuntime({
        model: pattern as never,
        port: 0,
        host: LOOPBACK,
        playground: false,
        ice: { turn: { urls: ['turn:x:3478'], secret: '' } },
      }),
    ).rejects.toThrow(/secret/);
    await expect(
      startRuntime({ model: pattern as never, port: 0, host: LOOPBACK, playground: false, ice: { publicAddress: 'not-an-ip' } }),
    ).rejects.toThrow(/publicAddress/);
  });
});

describe('ice_servers through the coordinator', () => {
  let coordinator: Coordinator;
  let hosted: Runtime;
  let token: string;

  beforeAll(async () => {
    const secret = 'runtime-secret-ice';
    coordinator = await startCoordinator({ database: await freshDatabase('sqlite'), port: 0, meterFlushMs: 0, runtimeSecret: secret });
    await coordinator.catalog.add('pattern', 5);
    const account = await coordinator.accounts.create('Acme');
    await coordinator.ledger.grantPromotional(account.id, 100_000);
    const { key } = await coordinator.apiKeys.create(account.id);
    hosted = await startRuntime({
      model: pattern as never,
      port: 0,
      host: LOOPBACK,
      playground: false,
      logger: createLogger({ test: 'ice-reachability-hosted' }, 'warn'),
      ice: { hostAddresses: [LOOPBACK], turn: { urls: [coturn.url], secret: coturn.secret, ttlSeconds: TTL_SECONDS } },
      hosted: { coordinatorUrl: coordinator.url, secret, runtimeId: 'gpu-ice' },
    });
    await waitUntil(async () => (await coordinator.registry.get('gpu-ice')) !== undefined, 20_000, 'the runtime to register');
    const minted = await fetch(`${coordinator.url}/tokens`, {
      method: 'POST',
      headers: { 'Service-API-Key': key, 'content-type': 'application/json' },
      body: JSON.stringify({ authorization_details: [{ type: 'session', resources: { models: { match: ['pattern'] } } }] }),
    });
    token = ((await minted.json()) as { token: string }).token;
  }, 60_000);

  afterAll(async () => {
    await hosted?.close();
    await coordinator?.close();
  });

  it('relays the runtime’s answer unchanged: the TURN entry with a credential for the session', async () => {
    const auth = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const created = await fetch(`${coordinator.url}/sessions`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({
        model: { name: 'pattern' },
        client_info: { sdk_version: '2.9.0', sdk_type: 'js' },
        supported_transports: [{ protocol: 'webrtc', version: '1.0' }],
      }),
    });
    expect(created.status).toBe(200);
    const sessionId = ((await created.json()) as { session_id: string }).session_id;
    await waitUntil(
      async () => (await fetch(`${coordinator.url}/sessions/${sessionId}`, { headers: auth })).status === 200,
      20_000,
      'the session to be placed',
    );

    const response = await fetch(`${coordinator.url}/sessions/${sessionId}/transport/webrtc/ice_servers`, { headers: auth });
    expect(response.status).toBe(200);
    const text = await response.text();
    expect(text).not.toContain(coturn.secret);
    const body = JSON.parse(text) as IceServersResponse;
    expect(body.ice_servers).toHaveLength(1);
    expect(body.ice_servers[0]!.uris).toEqual([coturn.url]);
    const { username, password } = body.ice_servers[0]!.credentials!;
    expect(username).toMatch(new RegExp(`^\\d+:${sessionId}$`));
    expect(await tryAllocate(coturn.address, coturn.port, username, password)).toMatchObject({ ok: true });
    await fetch(`${coordinator.url}/sessions/${sessionId}`, { method: 'DELETE', headers: auth });
  });
});

describe('answer candidates with ice.portRange and ice.publicAddress', () => {
  it('uses ports of the range only, and offers each host candidate at the public address too', async () => {
    const sessionId = await startSession(runtime.url);
    const transport = `${runtime.url}/sessions/${sessionId}/transport/webrtc`;
    const client = new RTCPeerConnection({
      iceServers: [],
      iceUseIpv6: false,
      iceAdditionalHostAddresses: [LOOPBACK],
      iceInterfaceAddresses: { udp4: LOOPBACK },
      iceFilterCandidatePair: (pair) => pair.remoteCandidate.host === LOOPBACK,
    });
    try {
      const registered = (await (await fetch(`${transport}/connections`, { method: 'POST' })).json()) as RegisterConnectionResponse;
      client.createDataChannel('data');
      for (const track of Object.values(registered.track_map)) client.addTransceiver(track.kind, { direction: track.direction });
      await client.setLocalDescription(await client.createOffer());
      await waitUntil(() => client.iceGatheringState === 'complete', 5_000, 'the client to gather');
      // Only the client's loopback candidates: the runtime checks nothing else.
      const offer = client
        .localDescription!.sdp.split('\r\n')
        .filter((line) => !line.startsWith('a=candidate:') || line.split(' ')[4] === LOOPBACK)
        .join('\r\n');
      const posted = await fetch(`${transport}/connections/${registered.connection_id}/sdp_params`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ sdp_offer: offer }),
      });
      expect(posted.status).toBe(202);
      let answer = '';
      await waitUntil(
        async () => {
          const got = await fetch(`${transport}/connections/${registered.connection_id}/sdp_params`);
          if (got.status !== 200) return false;
          answer = ((await got.json()) as { sdp_answer: string }).sdp_answer;
          return true;
        },
        10_000,
        'the answer',
      );

      // The client never applies the answer: nothing is sent to the documentation address.
      const candidates = answer
        .split('\r\n')
        .filter((line) => line.startsWith('a=candidate:'))
        .map((line) => {
          const [, , transportName, , address, port, , type, ...rest] = line.slice('a=candidate:'.length).split(' ');
          const related =
            rest.indexOf('raddr') >= 0 ? { raddr: rest[rest.indexOf('raddr') + 1], rport: Number(rest[rest.indexOf('rport') + 1]) } : {};
          return { transport: transportName, address, port: Number(port), type, ...related };
        });
      const hosts = candidates.filter((c) => c.type === 'host');
      const publics = candidates.filter((c) => c.type === 'srflx');
      expect(hosts.length, answer).toBeGreaterThan(0);
      for (const c of candidates) {
        expect(c.port, JSON.stringify(c)).toBeGreaterThanOrEqual(PORT_RANGE[0]);
        expect(c.port, JSON.stringify(c)).toBeLessThanOrEqual(PORT_RANGE[1]);
        expect([LOOPBACK, PUBLIC_IP]).toContain(c.address);
      }
      expect(hosts.every((c) => c.address === LOOPBACK)).toBe(true);
      // One public twin per host candidate: same port, the host as its base.
      expect(publics).toEqual(
        hosts.map((h) => ({ transport: 'udp', address: PUBLIC_IP, port: h.port, type: 'srflx', raddr: LOOPBACK, rport: h.port })),
      );
    } finally {
      await client.close();
      await stopSession(runtime.url, sessionId);
    }
  });
});
