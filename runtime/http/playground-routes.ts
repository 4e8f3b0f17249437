/**
 * The playground: a page at `/` that drives the model through the client library — straight
 * to this runtime (local mode), or, when `hosted` is given, also through a coordinator with a
 * token this runtime mints for the page (the API key stays on the server). Its files live in
 * runtime/playground/; the client library is bundled for the browser from client/browser.ts with
 * esbuild on first request and kept in memory.
 */

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { existsSync } from 'node:fs';
import { Hono, type Context } from 'hono';
import { ArclightError } from '../../protocol/errors.ts';
import { packageRoot } from '../../server-kit/package-root.ts';

/** The playground's hosted mode (`RuntimeOptions.playgroundHosted`). */
export interface PlaygroundHostedOptions {
  /** The coordinator the page connects to (cross-origin: its session API answers CORS). */
  readonly coordinatorUrl: string;
  /**
   * Mints a session-scoped token for this model on the server, once per Connect in the page
   * (e.g. `mintToken` from `arclight/client/server` with an API key). `expiresAt`: ms since the epoch.
   */
  mintToken(): Promise<{ readonly token: string; readonly expiresAt: number }>;
}

/** `GET /playground/config`: what the page offers besides local mode. */
export interface PlaygroundConfig {
  readonly hosted: { readonly coordinator_url: string } | null;
}

const STATIC_FILES: Record<string, string> = {
  'index.html': 'text/html; charset=utf-8',
  'playground.js': 'text/javascript; charset=utf-8',
  'playground.css': 'text/css; charset=utf-8',
};

/**
 * Headers on every playground file. The page holds a session token (hosted mode), so: no
 * framing (clickjacking), no MIME sniffing, no Referer leaving with the page's URL, and a CSP
 * allowing only this origin's scripts and styles, and connections to this runtime and the
 * configured coordinator (`blob:` workers: the client's frame stamper; `blob:`/`data:` images).
 */
export function playgroundSecurityHeaders(coordinatorUrl?: string): Record<string, string> {
  const coordinator = coordinatorUrl ? ` ${new URL(coordinatorUrl).origin}` : '';
  const csp = [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data: blob:",
    `media-src 'self' blob: mediastream:${coordinator}`,
    `connect-src 'self'${coordinator}`,
    "worker-src 'self' blob:",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ');
  return {
    'content-security-policy': csp,
    'x-content-type-options': 'nosniff',
    'x-frame-options': 'DENY',
    'referrer-policy': 'no-referrer',
  };
}

export function playgroundRoutes(options: { hosted?: PlaygroundHostedOptions } = {}): Hono {
  const app = new Hono();
  const root = packageRoot();
  const { hosted } = options;
  let bundle: Promise<string> | undefined;
  const security = playgroundSecurityHeaders(hosted?.coordinatorUrl);

  const serveStatic = async (name: string): Promise<Response> => {
    const type = STATIC_FILES[name];
    if (!type) throw new ArclightError('not_found', `No playground file ${name}.`);
    const body = await readFile(join(root, 'runtime', 'playground', name));
    return new Response(body, { headers: { 'content-type': type, 'cache-control': 'no-cache', ...security } });
  };

  app.get('/', () => serveStatic('index.html'));
  app.get('/playground/arclight-client.js', async () => {
    bundle ??= bundleClient(root);
    bundle.catch(() => (bundle = undefined));
    return new Response(await bundle, {
      headers: { 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'no-cache', ...security },
    });
  });
  const config: PlaygroundConfig = { hosted: hosted ? { coordinator_url: hosted.coordinatorUrl } : null };
  app.get('/playground/config', (c) => c.json(config, 200, { 'cache-control': 'no-cache' }));
  if (hosted) {
    // Only with the option: without it there is no key to mint with, and no route.
    app.post('/playground/token', async (c) => {
      assertSameOrigin(c);
      let minted;
      try {
        minted = await hosted.mintToken();
      } catch (error) {
        if (!(error instanceof ArclightError)) throw error;
        throw new ArclightError(error.code, `The runtime could not mint a playground token: ${error.message}`, {
          cause: error,
          ...(error.status === undefined ? {} : { status: error.status }),
        });
      }
      return c.json({ token: minted.token, token_type: 'Bearer', expires_at: Math.floor(minted.expiresAt / 1000) }, 200, {
        'cache-control': 'no-store',
      });
    });
  }
  app.get('/playground/:file', (c) => serveStatic(c.req.param('file')));
  return app;
}

/**
 * Tokens go to the playground's own page only. The runtime answers CORS `*` (it is a development
 * server), so without this any site open in the same browser could read a token billed to the
 * account behind the runtime's key. Browsers send `Origin` on every POST; tools such as curl send
 * none and pass (they can reach the port anyway).
 */
function assertSameOrigin(c: Context): void {
  const origin = c.req.header('origin');
  const host = c.req.header('host');
  if (origin !== undefined && origin !== `http://${host}` && origin !== `https://${host}`) {
    throw new ArclightError('forbidden', 'Playground tokens are only given to pages this runtime serves.');
  }
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
