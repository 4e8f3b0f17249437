/**
 * Our Node client (WebRTC from @roamhq/wrtc) as a process of its own, for tests whose clients
 * must live somewhere the test process is not — another network namespace ("host", see
 * createTestLan in ./netns.ts), started with `ip netns exec <ns> node …`:
 *
 *   ARCLIGHT_TEST_TOKEN=<token> node --conditions=source --import tsx test/support/node-client-process.ts <api-url> <model>
 *
 * It connects through the coordinator at <api-url> with the token and watches the model's first
 * video track. On stdout, one JSON object per line:
 *   {"event":"status","status":"ready","session_id":"…"}   at every status change
 *   {"event":"frames","frames":120,"width":1280,"height":720}   every 250 ms once video arrives
 *   {"event":"error","code":"…","message":"…"}
 *   {"event":"session_ended","reason":"…"}   the server ended it
 * SIGTERM: disconnects (for the session's creator that ends the session at the coordinator, which
 * stops its billing), prints {"event":"exit"} and exits 0.
 */

import { ArclightClient } from '../../client/node.ts';
import { VideoProbe } from './video-probe.ts';

const [apiUrl, modelName] = process.argv.slice(2);
const token = process.env['ARCLIGHT_TEST_TOKEN'];
if (!apiUrl || !modelName || !token) {
  process.stderr.write('usage: ARCLIGHT_TEST_TOKEN=<token> node-client-process.ts <api-url> <model>\n');
  process.exit(2);
}

const say = (record: Record<string, unknown>): void => void process.stdout.write(`${JSON.stringify(record)}\n`);

const client = new ArclightClient({ modelName, apiUrl });
let probe: VideoProbe | undefined;
client.on('statusChanged', (status) => say({ event: 'status', status, session_id: client.getSessionId() ?? null }));
client.on('error', (error) => say({ event: 'error', code: error.code, message: error.message }));
client.on('sessionEnded', (reason) => say({ event: 'session_ended', reason }));
client.on('trackReceived', (_name, track) => {
  if (track.kind === 'video' && probe === undefined) probe = new VideoProbe(track);
});
const ticker = setInterval(() => {
  if (probe && probe.frames > 0) say({ event: 'frames', frames: probe.frames, width: probe.width, height: probe.height });
}, 250);

let stopping = false;
process.on('SIGTERM', () => {
  if (stopping) return;
  stopping = true;
  clearInterval(ticker);
  probe?.stop();
  void client
    .disconnect()
    .catch((error: unknown) => say({ event: 'error', code: 'disconnect_failed', message: String(error) }))
    .finally(() => {
      say({ event: 'exit' });
      // wrtc's native threads would keep the process alive (client/node.ts).
      process.exit(0);
    });
});

client.connect(token).catch((error: unknown) => say({ event: 'error', code: 'connect_failed', message: String(error) }));
