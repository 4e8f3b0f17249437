/**
 * Self-test of the browser harness: Chromium inside a test network namespace
 * reaches a server bound to the host end of the veth, the fake webcam works
 * in a page treated as a secure context, ICE gathers the namespace address,
 * and everything is torn down afterwards.
 */
import { execFileSync } from 'node:child_process';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { launchChromiumInNamespace, launchChromiumOnLoopback, type LaunchedChromium } from './chromium.ts';
import {
  assertCanCreateNetworkNamespaces,
  canCreateNetworkNamespaces,
  createTestNetwork,
  findIpBinary,
  type TestNetwork,
} from './netns.ts';

// Loaded at /: fetch + fake webcam. Loaded at /?ice-only: ICE gathering without getUserMedia.
const PAGE = `<!doctype html>
<meta charset="utf-8">
<title>arclight harness</title>
<script>
window.harnessResult = (async () => {
  const out = { secure: window.isSecureContext };
  if (location.search !== '?ice-only') {
    out.ping = await (await fetch('/ping')).text();
    const stream = await navigator.mediaDevices.getUserMedia({ video: true });
    const track = stream.getVideoTracks()[0];
    out.settings = track.getSettings();
    track.stop();
  }
  // Gather ICE host candidates without any STUN server.
  const pc = new RTCPeerConnection({ iceServers: [] });
  pc.createDataChannel('probe');
  out.candidates = [];
  const gathered = new Promise((resolve) => {
    pc.onicecandidate = (e) => (e.candidate ? out.candidates.push(e.candidate.candidate) : resolve());
  });
  await pc.setLocalDescription(await pc.createOffer());
  await Promise.race([gathered, new Promise((r) => setTimeout(r, 5000))]);
  pc.close();
  return out;
})().catch((e) => ({ error: String(e && e.stack || e) }));
</script>`;

interface HarnessResult {
  error?: string;
  ping?: string;
  secure: boolean;
  settings?: { width?: number; height?: number; frameRate?: number; deviceId?: string };
  candidates: string[];
}

function listen(server: Server, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve((server.address() as AddressInfo).port));
  });
}

describe('browser test harness', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const fn of cleanups.reverse()) await fn().catch(() => {});
  });

  it('has the prerequisites (root + iproute2); required, not skipped', () => {
    assertCanCreateNetworkNamespaces();
    expect(canCreateNetworkNamespaces()).toBe(true);
  });

  it('runs Chromium in a namespace against a server on the host end of a veth', { timeout: 60_000 }, async () => {
    const net: TestNetwork = await createTestNetwork();
    cleanups.push(() => net.close());
    expect(net.hostAddress).toMatch(/^10\.231\.\d+\.\d+$/);

    // run() executes inside the namespace and sees only the peer address.
    const { stdout } = await net.run(['ip', '-o', '-4', 'addr']);
    expect(stdout).toContain(`inet ${net.peerAddress}/30`);
    expect(stdout).not.toContain(net.hostAddress);

    const seen: string[] = [];
    const server = createServer((req: IncomingMessage, res) => {
      seen.push(`${req.url} from ${req.socket.remoteAddress}`);
      if (req.url === '/ping') {
        res.writeHead(200, { 'content-type': 'text/plain' }).end('pong');
      } else {
        res.writeHead(200, { 'content-type': 'text/html' }).end(PAGE);
      }
    });
    const port = await listen(server, net.hostAddress);
    cleanups.push(() => new Promise<void>((r) => server.close(() => r())));
    const origin = `http://${net.hostAddress}:${port}`;

    const chrome: LaunchedChromium = await launchChromiumInNamespace(net, { secureOrigins: [origin] });
    cleanups.push(() => chrome.close());
    // Plain browser.newPage(): getUserMedia is auto-accepted by --use-fake-ui-for-media-stream.
    const page = await chrome.browser.newPage();
    await page.goto(`${origin}/`);
    const result = (await page.evaluate('window.harnessResult')) as HarnessResult;

    expect(result.error).toBeUndefined();
    // namespace -> host traffic works, and really comes from inside the namespace
    expect(result.ping).toBe('pong');
    expect(seen).toContain(`/ping from ${net.peerAddress}`);
    // --unsafely-treat-insecure-origin-as-secure + fake media device
    expect(result.secure).toBe(true);
    expect(result.settings?.width).toBeGreaterThan(0);
    expect(result.settings?.height).toBeGreaterThan(0);
    // once getUserMedia was granted, ICE offers the namespace address (not an mDNS *.local name)
    expect(result.candidates.some((c) => c.includes(` ${net.peerAddress} `))).toBe(true);
    expect(result.candidates.some((c) => c.includes('.local'))).toBe(false);

    // A receive-only page (no getUserMedia) gets candidates only through chrome.newPage(),
    // which pre-grants camera/microphone; browser.newPage() would gather none here.
    const icePage = await chrome.newPage();
    await icePage.goto(`${origin}/?ice-only`);
    const ice = (await icePage.evaluate('window.harnessResult')) as HarnessResult;
    expect(ice.error).toBeUndefined();
    expect(ice.candidates.some((c) => c.includes(` ${net.peerAddress} `))).toBe(true);

    await chrome.close();
    await chrome.close(); // idempotent
    await new Promise<void>((r) => server.close(() => r()));
    await net.close();
    await net.close(); // idempotent

    const ip = findIpBinary() as string;
    const namespaces = execFileSync(ip, ['netns', 'list'], { encoding: 'utf8' });
    expect(namespaces.split('\n').map((l) => l.split(' ')[0])).not.toContain(net.namespace);
    expect(() => execFileSync(ip, ['link', 'show', net.hostInterface], { stdio: 'ignore' })).toThrow();
  });

  it('runs Chromium on loopback for pages that need no WebRTC', { timeout: 60_000 }, async () => {
    const server = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<title>loopback ok</title>'));
    const port = await listen(server, '127.0.0.1');
    cleanups.push(() => new Promise<void>((r) => server.close(() => r())));
    const chrome = await launchChromiumOnLoopback();
    cleanups.push(() => chrome.close());
    const page = await chrome.browser.newPage();
    await page.goto(`http://127.0.0.1:${port}/`);
    expect(await page.title()).toBe('loopback ok');
    // loopback counts as a secure context without any flag
    expect(await page.evaluate('window.isSecureContext')).toBe(true);
    await chrome.close();
  });
});
