/**
 * Hot reload: how long from a save to the running session answering with the new version.
 *
 *   node --conditions=source --import tsx bench/hot-reload.ts [--reloads 20] [--poll-ms 10] [--json out.json]
 *
 * Runs the real CLI (`bin/arclight.js dev <folder>`, a child process) over a small model in a temp
 * folder whose handler returns a constant from a file the module imports (`version.ts`). One Node
 * client (local mode, wrtc) connects once; for each reload the bench rewrites version.ts and sends
 * the command every `--poll-ms` until the reply carries the new constant. The figure is the time
 * from the write completing to that reply, so it includes the watcher's debounce (100 ms), the
 * re-import (tsx transform of the changed files), the swap, and one command round trip at most
 * `--poll-ms` late. The session must stay the same throughout (checked).
 */

import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { ArclightClient, nodeWebRtc } from '../client/node.ts';
import { loadavg, sleep, summarise } from './support/measure.ts';
import { finishReport, runBench, runInfo } from './support/report.ts';

const ROOT = fileURLToPath(new URL('../', import.meta.url));

const { values: args } = parseArgs({
  options: {
    reloads: { type: 'string', default: '20' },
    'poll-ms': { type: 'string', default: '10' },
    json: { type: 'string' },
  },
});
const RELOADS = Number(args.reloads);
const POLL_MS = Number(args['poll-ms']);

const MODEL = `
import { VERSION } from './version.ts';
const frame = { width: 320, height: 240, format: 'i420' as const, data: new Uint8Array(320 * 240 * 1.5).fill(80) };
export default {
  name: 'hot-bench',
  fps: 30,
  tracks: [{ name: 'main_video', kind: 'video' as const, direction: 'recvonly' as const, width: 320, height: 240 }],
  commands: { which: { params: { type: 'object' }, handler: () => ({ version: VERSION }) } },
  async run(session: { ticks(): AsyncIterable<number>; emit(track: string, frame: unknown): Promise<void> }) {
    for await (const _ of session.ticks()) await session.emit('main_video', frame);
  },
};
`;
const versionSource = (n: number): string => `export const VERSION: number = ${n};\n`;

await runBench('hot-reload', async () => {
  const info = runInfo();
  const folder = await mkdtemp(join(tmpdir(), 'arclight-hot-bench-'));
  await writeFile(join(folder, 'package.json'), JSON.stringify({ type: 'module' }));
  await writeFile(join(folder, 'version.ts'), versionSource(0));
  await writeFile(join(folder, 'index.ts'), MODEL);
  const env = { ...process.env, ARCLIGHT_LOG: 'error' };
  const child = spawn(
    process.execPath,
    [
      '--conditions=source',
      '--import',
      'tsx',
      'bin/arclight.js',
      'dev',
      folder,
      '--port',
      '0',
      '--ice-host',
      '127.0.0.1',
      '--no-recording',
    ],
    { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let stdout = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  let client: ArclightClient | undefined;
  try {
    let url: string | undefined;
    for (const deadline = Date.now() + 60_000; !url; await sleep(50)) {
      url = /on (http:\/\/\S+)/.exec(stdout)?.[1]?.replace('localhost', '127.0.0.1');
      if (Date.now() > deadline) throw new Error(`arclight dev printed no URL:\n${stdout}`);
    }
    client = new ArclightClient({ modelName: 'hot-bench', local: true, localRuntimeUrl: url, rtc: nodeWebRtc });
    await client.connect();
    const sessionId = client.getSessionId();
    const which = async () => ((await client!.sendCommand('which', {}))?.data as { version: number }).version;
    const samples: number[] = [];
    for (let n = 1; n <= RELOADS; n++) {
      await writeFile(join(folder, 'version.ts'), versionSource(n));
      const written = performance.now();
      while ((await which()) !== n) {
        if (performance.now() - written > 10_000) throw new Error(`reload ${n} not served after 10 s:\n${stdout}`);
        await sleep(POLL_MS);
      }
      samples.push(performance.now() - written);
      if (client.getSessionId() !== sessionId) throw new Error('the session changed during the reloads');
      // Let the watcher settle between saves, as between a person's saves.
      await sleep(300);
    }
    const summary = summarise(samples);
    const round = (ms: number) => Math.round(ms);
    process.stdout.write(
      `write → new version answering, ${samples.length} reloads (same session): median ${round(summary.p50)} ms, min ${round(summary.min)}, p90 ${round(summary.p90)}, max ${round(summary.max)}\n`,
    );
    process.stdout.write(`samples (ms): ${samples.map(round).join(' ')}\n`);
    finishReport(info, loadavg(), args.json, { reloads: RELOADS, pollMs: POLL_MS, samplesMs: samples, summary });
  } finally {
    await client?.disconnect().catch(() => {});
    child.kill('SIGTERM');
    await new Promise((resolve) => child.once('exit', resolve));
    await rm(folder, { recursive: true, force: true });
  }
});
