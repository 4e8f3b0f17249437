/**
 * The playground (local mode): a page at `/` that drives the model through the client library.
 * Its files live in runtime/playground/; the client library is bundled for the browser from
 * client/browser.ts with esbuild on first request and kept in memory.
 */

import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Hono } from 'hono';
import { ArclightError } from '../../protocol/errors.ts';

/** The package root: the nearest folder above this file holding package.json. */
function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error('arclight: package root not found');
    dir = parent;
  }
  return dir;
}

const STATIC_FILES: Record<string, string> = {
  'index.html': 'text/html; charset=utf-8',
  'playground.js': 'text/javascript; charset=utf-8',
  'playground.css': 'text/css; charset=utf-8',
};

export function playgroundRoutes(): Hono {
  const app = new Hono();
  const root = packageRoot();
  let bundle: Promise<string> | undefined;

  const serveStatic = async (name: string): Promise<Response> => {
    const type = STATIC_FILES[name];
    if (!type) throw new ArclightError('not_found', `No playground file ${name}.`);
    const body = await readFile(join(root, 'runtime', 'playground', name));
    return new Response(body, { headers: { 'content-type': type, 'cache-control': 'no-cache' } });
  };

  app.get('/', () => serveStatic('index.html'));
  app.get('/playground/arclight-client.js', async () => {
    bundle ??= bundleClient(root);
    bundle.catch(() => (bundle = undefined));
    return new Response(await bundle, { headers: { 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'no-cache' } });
  });
  app.get('/playground/:file', (c) => serveStatic(c.req.param('file')));
  return app;
}

async function bundleClient(root: string): Promise<string> {
  const prebuilt = join(root, 'dist', 'browser', 'arclight-client.js');
  const source = join(root, 'client', 'browser.ts');
  if (!existsSync(source) && existsSync(prebuilt)) return readFile(prebuilt, 'utf8');
  const { build } = await import('esbuild');
  const result = await build({
    entryPoints: [source],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    write: false,
    logLevel: 'silent',
  });
  return result.outputFiles[0]!.text;
}
