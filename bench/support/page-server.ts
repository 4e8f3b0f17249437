/**
 * The Chromium side of the benchmarks: a tiny node:http server for a bench page and the client
 * library (client/browser.ts, bundled with esbuild at start), and page script they share.
 */

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/**
 * Page script (for a `<script type="module">`) defining `preferH264()`: from then on, every video
 * transceiver the page adds offers H.264 first (Constrained Baseline, packetization-mode 1, then
 * other H.264), so the runtime, which answers in the offer's codec order, picks H.264.
 */
export const PREFER_H264_SCRIPT = `
function preferH264() {
  const original = RTCPeerConnection.prototype.addTransceiver;
  RTCPeerConnection.prototype.addTransceiver = function (kind, init) {
    const transceiver = original.call(this, kind, init);
    if (kind === 'video') {
      const codecs = RTCRtpReceiver.getCapabilities('video').codecs;
      const rank = (c) => (c.mimeType === 'video/H264' ? (/packetization-mode=1/.test(c.sdpFmtpLine ?? '') && /42e01f/.test(c.sdpFmtpLine ?? '') ? 0 : 1) : 2);
      transceiver.setCodecPreferences([...codecs].sort((a, b) => rank(a) - rank(b)));
    }
    return transceiver;
  };
}
`;

/**
 * Serves `page` at `/` (and `/index.html`) and the bundled client library at
 * `/arclight-client.js` on `host`, on a free port; nothing is cached.
 */
export async function servePage(host: string, page: string): Promise<{ server: Server; url: string }> {
  const bundled = await build({
    entryPoints: [join(ROOT, 'client', 'browser.ts')],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    write: false,
    logLevel: 'warning',
  });
  const clientJs = bundled.outputFiles[0]!.text;
  const server = createServer((req, res) => {
    if (req.url === '/' || req.url === '/index.html') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' }).end(page);
    } else if (req.url === '/arclight-client.js') {
      res.writeHead(200, { 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'no-store' }).end(clientJs);
    } else if (req.url === '/favicon.ico') {
      res.writeHead(204).end();
    } else {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, resolve);
  });
  return { server, url: `http://${host}:${(server.address() as AddressInfo).port}/` };
}
