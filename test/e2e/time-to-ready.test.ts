/**
 * What a connect asks of the network, after issue 26's cuts — behaviour, not timing (the figures
 * are bench/time-to-ready.ts's): the runtime's DTLS certificate exists before the first offer and
 * serves every peer; the offer's own 202 carries the answer (no GET), and the answer makes the
 * runtime the DTLS server; `ice_servers` and the connection id are asked for together; the
 * session log's `connection ready` line has the runtime's connect steps in order; through the
 * coordinator, a session placed by `POST /sessions` is not polled for.
 */

import { RTCDtlsTransport } from 'werift';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ArclightClient } from '../../client/node.ts';
import pattern from '../../models/examples/pattern/index.ts';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import { startHostedStack, type HostedStack } from '../support/hosted-stack.ts';

const LOOPBACK = '127.0.0.1';

interface Call {
  method: string;
  path: string;
  status: number;
  start: number;
  end: number;
  body: unknown;
}

/** Records every fetch of this process (the client's calls) until `stop()`. */
function recordFetch(): { calls: Call[]; stop(): void } {
  const calls: Call[] = [];
  const realFetch = globalThis.fetch;
  globalThis.fetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const start = performance.now();
    const response = await realFetch(input, init);
    const end = performance.now();
    const text = await response.clone().text();
    let body: unknown;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = text;
    }
    calls.push({
      method: init?.method ?? 'GET',
      path: new URL(String(input instanceof Request ? input.url : input)).pathname,
      status: response.status,
      start,
      end,
      body,
    });
    return response;
  };
  return { calls, stop: () => (globalThis.fetch = realFetch) };
}

function fingerprintOf(sdp: string): string | undefined {
  return /^a=fingerprint:\S+ (\S+)\r?$/m.exec(sdp)?.[1];
}

describe('time to ready: the connect path (local)', () => {
  let runtime: Runtime;
  let certificateFingerprint: string;
  const clients: ArclightClient[] = [];

  beforeAll(async () => {
    // As in a fresh process: no certificate yet.
    RTCDtlsTransport.localCertificate = undefined;
    RTCDtlsTransport.localCertificatePromise = undefined;
    runtime = await startRuntime({
      model: pattern as never,
      port: 0,
      host: LOOPBACK,
      ice: { hostAddresses: [LOOPBACK] },
      playground: false,
    });
    // Made at start, before any client asked for anything.
    expect(RTCDtlsTransport.localCertificate).toBeDefined();
    certificateFingerprint = RTCDtlsTransport.localCertificate!.getFingerprints()[0]!.value;
  });
  afterEach(async () => {
    for (const client of clients.splice(0)) await client.disconnect().catch(() => {});
  });
  afterAll(async () => runtime?.close());

  it("two connects: the answer in the offer's 202 (no GET), passive DTLS on the process certificate, ice_servers and the connection id together, the steps logged", async () => {
    for (let round = 0; round < 2; round++) {
      const recorder = recordFetch();
      const client = new ArclightClient({ modelName: 'pattern', local: true, localRuntimeUrl: runtime.url });
      clients.push(client);
      try {
        await client.connect();
      } finally {
        recorder.stop();
      }
      const { calls } = recorder;
      const offer = calls.find((c) => c.method === 'POST' && c.path.endsWith('/sdp_params'));
      expect(offer?.status).toBe(202);
      const answer = (offer!.body as { sdp_answer?: string; connection_id: number }).sdp_answer;
      expect(answer, 'the 202 carries the answer').toMatch(/^v=0/);
      expect(calls.filter((c) => c.method === 'GET' && c.path.endsWith('/sdp_params'))).toEqual([]);
      expect(answer!.match(/^a=setup:\w+/gm)?.every((line) => line === 'a=setup:passive')).toBe(true);
      expect(fingerprintOf(answer!)?.toLowerCase()).toBe(certificateFingerprint.toLowerCase());
      // Asked together: each started before the other ended.
      const iceServers = calls.find((c) => c.path.endsWith('/ice_servers'))!;
      const registered = calls.find((c) => c.method === 'POST' && c.path.endsWith('/connections'))!;
      expect(registered.start).toBeLessThan(iceServers.end);
      expect(iceServers.start).toBeLessThan(registered.end);

      const logs = (await (await fetch(`${runtime.url}/sessions/${client.getSessionId()}/logs`)).json()) as {
        lines: Array<{ message: string; fields?: { connection?: number; steps?: Record<string, number> } }>;
      };
      const ready = logs.lines.find((l) => l.message === 'connection ready' && l.fields?.connection === client.getConnectionId());
      const steps = ready?.fields?.steps;
      expect(steps?.offer_at).toBeGreaterThan(0);
      const order = ['offer_applied', 'answer_ready', 'ice_connected', 'dtls_connected', 'channel_open', 'ready'].map(
        (step) => steps?.[step],
      );
      expect(
        order.every((t) => typeof t === 'number' && t >= 0),
        JSON.stringify(steps),
      ).toBe(true);
      expect(order.slice(0, 2)).toEqual([...order.slice(0, 2)].sort((a, b) => a! - b!));
      expect(steps!.ready).toBeGreaterThanOrEqual(Math.max(steps!.dtls_connected!, steps!.channel_open!));
      await client.disconnect();
    }
  }, 60_000);
});

describe('time to ready: the connect path (hosted)', () => {
  let stack: HostedStack;
  beforeAll(async () => {
    stack = await startHostedStack({ runtimeId: 'gpu-ttr' });
  });
  afterAll(async () => stack?.close());

  it('a session placed by POST /sessions is used at once: no GET /sessions/{id} poll, and the answer comes through the relay in the 202', async () => {
    const token = await stack.mintToken();
    const client = new ArclightClient({ modelName: 'pattern', apiUrl: stack.coordinator.url });
    const recorder = recordFetch();
    try {
      await client.connect(token);
    } finally {
      recorder.stop();
    }
    try {
      const { calls } = recorder;
      const created = calls.filter((c) => c.method === 'POST' && c.path === '/sessions');
      expect(created).toHaveLength(1);
      expect((created[0]!.body as { capabilities?: unknown }).capabilities).toBeDefined();
      expect(calls.filter((c) => c.method === 'GET' && /^\/sessions\/[^/]+$/.test(c.path))).toEqual([]);
      expect(calls.filter((c) => c.method === 'GET' && c.path.endsWith('/sdp_params'))).toEqual([]);
    } finally {
      await client.disconnect();
    }
  }, 60_000);
});
