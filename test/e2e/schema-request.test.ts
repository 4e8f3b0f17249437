/**
 * Schema requests on the data channel (issue 21 part 7; spec, runtime behaviour 4: "responses to
 * clip, recording and schema requests address only the requesting client"). Neither the
 * incumbent's HTTP contract (shared/reference) nor @reactor-team/js-sdk 2.9.0 names such a
 * message, so it is designed beside `request_clip`: `{scope: "runtime", data: {type:
 * "request_schema", data: {}, request_id}}` → `{scope: "application", data: {type: "schema", data:
 * {capabilities}, request_id}}` to the requester alone.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArclightClient } from '../../client/node.ts';
import pattern from '../../models/examples/pattern/index.ts';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import { openRawPeer, type RawPeer } from '../support/raw-peer.ts';

const LOOPBACK = '127.0.0.1';

describe('request_schema on the data channel', () => {
  let runtime: Runtime;
  let client: ArclightClient;
  let other: RawPeer;
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
    other = await openRawPeer(runtime.url, client.getSessionId()!);
    await other.waitFor((m) => m.scope === 'runtime' && m.data.type === 'connection_info', 15_000);
  }, 60_000);
  afterAll(async () => {
    other?.close();
    await client?.disconnect();
    await runtime?.close();
  });

  it("answers the model's capabilities, as GET /capabilities has them, to the requester alone", async () => {
    const fromHttp = await (await fetch(`${runtime.url}/capabilities`)).json();
    const from = other.messages.length;
    expect(await client.requestSchema()).toEqual(fromHttp);
    // The other client's channel: a ping sent now is answered after anything the runtime sent it
    // before (one connection's messages are ordered), so a broadcast schema would precede the pong.
    other.sendRaw(JSON.stringify({ scope: 'runtime', data: { type: 'ping', data: {}, request_id: 'after' } }));
    await other.waitFor((m) => m.data.request_id === 'after', 15_000, from);
    expect(other.messages.slice(from).filter((m) => m.data.type === 'schema')).toEqual([]);
  }, 30_000);

  it('correlates the answer by request_id on a plain channel', async () => {
    const from = other.messages.length;
    other.sendRaw(JSON.stringify({ scope: 'runtime', data: { type: 'request_schema', data: {}, request_id: 's1' } }));
    const answer = await other.waitFor((m) => m.data.request_id === 's1', 15_000, from);
    expect(answer.scope).toBe('application');
    expect(answer.data.type).toBe('schema');
    const capabilities = (answer.data.data as { capabilities: { schema_hash?: string; commands: unknown[] } }).capabilities;
    expect(capabilities.schema_hash).toBe(client.getCapabilities()?.schema_hash);
    expect(capabilities.commands.length).toBeGreaterThan(0);
  }, 30_000);
});
