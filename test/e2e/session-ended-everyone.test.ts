/**
 * `session_ended` with its reason reaches every connected client (spec: the runtime tells each
 * client why before closing; issue 21 part 12). Three connections on one local session — the
 * client library and two plain peers — and the session stopped with a reason over HTTP: each hears
 * `session_ended` with that reason, and the library's client reports it as `sessionEnded`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArclightClient } from '../../client/node.ts';
import pattern from '../../models/examples/pattern/index.ts';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import { openRawPeer, type RawPeer } from '../support/raw-peer.ts';

const LOOPBACK = '127.0.0.1';

describe('session_ended reaches every client', () => {
  let runtime: Runtime;
  let client: ArclightClient;
  const peers: RawPeer[] = [];
  beforeAll(async () => {
    runtime = await startRuntime({
      model: pattern as never,
      port: 0,
      host: LOOPBACK,
      ice: { hostAddresses: [LOOPBACK] },
      playground: false,
    });
    client = new ArclightClient({ modelName: 'pattern', local: true, localRuntimeUrl: runtime.url });
    await client.connect();
    for (let i = 0; i < 2; i++) {
      const peer = await openRawPeer(runtime.url, client.getSessionId()!);
      await peer.waitFor((m) => m.scope === 'runtime' && m.data.type === 'connection_info', 15_000);
      peers.push(peer);
    }
  }, 60_000);
  afterAll(async () => {
    for (const peer of peers) peer.close();
    await client?.disconnect();
    await runtime?.close();
  });

  it('each of three connections hears session_ended with the reason it was stopped for', async () => {
    const heard = new Promise<string>((resolve) => client.on('sessionEnded', resolve));
    const sessionId = client.getSessionId()!;
    const stopped = await fetch(`${runtime.url}/stop_session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ session_id: sessionId, reason: 'maintenance window' }),
    });
    expect(stopped.status).toBe(200);
    for (const peer of peers) {
      const ended = await peer.waitFor((m) => m.scope === 'runtime' && m.data.type === 'session_ended', 15_000);
      expect(ended.data.data).toEqual({ session_id: sessionId, reason: 'maintenance window' });
    }
    expect(await heard).toBe('maintenance window');
  }, 30_000);
});
