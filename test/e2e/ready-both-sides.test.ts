/**
 * connect() resolves once the runtime's side is ready too. A client's data channel opens (and its
 * peer connects) before the runtime has attached its end: with a one-way delay D, the runtime
 * hears the channel open D after the client does, and until then nothing it sends that
 * connection arrives. A session ended in that window used to tell the just-connected client
 * nothing (seen as a rare failure of "a tracks change ends the open session" in model-reload).
 * Now connect() waits for the runtime's connection_info, so a session ended at once after it
 * resolves still reaches the client with its reason.
 *
 * The delay is the runtime's test-only network impairment (runtime/faults/network-faults.ts):
 * 300 ms each way on every datagram, so the window is 300 ms wide and an HTTP stop sent the moment
 * connect() resolves falls inside it on the old client, whatever the machine's load.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArclightClient } from '../../client/node.ts';
import pattern from '../../models/examples/pattern/index.ts';
import type { Runtime } from '../../runtime/index.ts';
import { startRuntimeWithFaults } from '../../runtime/faults/start-runtime-with-faults.ts';
import { NetworkFaults } from '../../runtime/faults/network-faults.ts';

const LOOPBACK = '127.0.0.1';

describe('connect() and the runtime side of the connection', () => {
  let runtime: Runtime;
  const network = new NetworkFaults();
  beforeAll(async () => {
    runtime = await startRuntimeWithFaults(
      { model: pattern as never, port: 0, host: LOOPBACK, ice: { hostAddresses: [LOOPBACK] }, playground: false },
      { network },
    );
    network.set({ delayMs: 300 });
  });
  afterAll(async () => runtime?.close());

  it('a session stopped the moment connect() resolves still tells the client why', async () => {
    const client = new ArclightClient({ modelName: 'pattern', local: true, localRuntimeUrl: runtime.url });
    const heard = new Promise<string>((resolve) => client.on('sessionEnded', resolve));
    await client.connect();
    const stopped = await fetch(`${runtime.url}/stop_session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ session_id: client.getSessionId(), reason: 'stopped at once' }),
    });
    expect(stopped.status).toBe(200);
    const outcome = await Promise.race([heard, new Promise((resolve) => setTimeout(() => resolve('nothing heard'), 15_000))]);
    expect(outcome).toBe('stopped at once');
    await client.disconnect().catch(() => {});
  }, 60_000);
});
