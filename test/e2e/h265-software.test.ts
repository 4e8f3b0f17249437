/**
 * H.265 above 720p, reachable without a hardware encoder (issue 21 part 4): `arclight serve
 * --codecs h265,h264,vp8` answers a client that offers H.265 with software x265. A real peer
 * (werift, offering H.265 only — no browser here decodes it) receives 1080p, and FFmpeg (node-av)
 * decodes the frames received to the picture the model drew. Without the flag the runtime keeps
 * H.264 first (h265.test.ts covers the runtime option; this covers the operator's switch).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { rgbToYuv } from '../../models/examples/shared/i420-canvas.ts';
import { HEIGHT, patchesFor, WIDTH } from '../fixtures/hd-model.ts';
import { waitUntil } from '../support/video-probe.ts';
import { decodeTrack, openWeriftPeer, type WeriftPeer } from '../support/werift-peer.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

describe('arclight serve --codecs h265,h264,vp8', () => {
  let child: ChildProcess | undefined;
  let peer: WeriftPeer | undefined;
  afterAll(async () => {
    await peer?.close();
    if (child && child.exitCode === null) {
      const exited = new Promise((resolve) => child!.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
  });

  it('streams 1080p H.265 from software x265 to a client that offers it, and the frames decode to the picture', async () => {
    const env: NodeJS.ProcessEnv = { ...process.env, ARCLIGHT_LOG: 'warn' };
    for (const key of Object.keys(env)) if (key.startsWith('VITEST')) delete env[key];
    child = spawn(
      process.execPath,
      [
        '--conditions=source',
        '--import',
        'tsx',
        'bin/arclight.js',
        'serve',
        'test/fixtures/hd-model.ts',
        '--codecs',
        'h265,h264,vp8',
        '--port',
        '0',
        '--host',
        '127.0.0.1',
        '--ice-host',
        '127.0.0.1',
        '--no-playground',
        '--no-recording',
      ],
      { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    await waitUntil(() => /serving model "hd" on http:\/\/\S+/.test(output) || child!.exitCode !== null, 60_000, 'the runtime to serve');
    const url = /serving model "hd" on (http:\/\/\S+)/.exec(output)?.[1]?.replace('localhost', '127.0.0.1');
    expect(url, output).toBeDefined();

    peer = await openWeriftPeer(url!, { videoMime: 'video/H265' });
    expect(peer.video.codecs[0]?.mimeType).toBe('video/H265');
    let decoded = 0;
    let size: { width: number; height: number } | undefined;
    const samples: Array<{ y: number; v: number }> = [];
    const [patch] = patchesFor(WIDTH, HEIGHT);
    const decoding = await decodeTrack(peer, 'main_video', 'h265', (frame) => {
      decoded++;
      size = { width: frame.width, height: frame.height };
      const x = patch!.x + patch!.size / 2;
      const y = patch!.y + patch!.size / 2;
      const luma = frame.width * frame.height;
      samples.push({ y: frame.data[y * frame.width + x]!, v: frame.data[luma * 1.25 + (y / 2) * (frame.width / 2) + x / 2]! });
    });
    try {
      // x265 at 1080p on a loaded 2-core machine manages a few frames a second: the property is
      // that they arrive and decode, not how fast.
      await waitUntil(() => decoded >= 5, 90_000, 'five decoded 1080p H.265 frames');
    } finally {
      decoding.close();
    }
    expect(size).toEqual({ width: WIDTH, height: HEIGHT });
    const red = rgbToYuv(patch!.rgb.r, patch!.rgb.g, patch!.rgb.b);
    const last = samples.at(-1)!;
    expect(Math.abs(last.y - red.y)).toBeLessThan(12);
    expect(Math.abs(last.v - red.v)).toBeLessThan(12);
  }, 180_000);
});
