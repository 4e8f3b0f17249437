/**
 * A coordinator in its own process for bench/coordinator-throughput.ts, so the load generator
 * does not share its event loop. `--mode hono` is the real coordinator (startCoordinator);
 * `--mode raw` serves the same `POST /tokens` (same parsing, same TokenService) from bare
 * `node:http`, to measure what hono costs on that route. Prints `listening on <url>`.
 *
 *   node --conditions=source --import tsx bench/support/coordinator-server.ts --database <url> --mode hono|raw
 */

import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { ApiKeyStore } from '../../coordinator/accounts/api-keys.ts';
import { startCoordinator } from '../../coordinator/index.ts';
import { ModelCatalog } from '../../coordinator/models/model-catalog.ts';
import { openStorage } from '../../coordinator/storage/database.ts';
import { SigningKeyring } from '../../coordinator/tokens/signing-keyring.ts';
import { parseTokenRequest } from '../../coordinator/tokens/token-request.ts';
import { TokenService } from '../../coordinator/tokens/token-service.ts';
import { ArclightError } from '../../protocol/errors.ts';

const { values } = parseArgs({ options: { database: { type: 'string' }, mode: { type: 'string', default: 'hono' } } });
const database = values.database!;
// A clean exit on SIGTERM, so `node --cpu-prof` writes its profile.
process.once('SIGTERM', () => process.exit(0));

if (values.mode === 'hono') {
  const coordinator = await startCoordinator({ database, port: 0, meterFlushMs: 0 });
  process.stdout.write(`listening on ${coordinator.url}\n`);
} else {
  const storage = await openStorage(database);
  const apiKeys = new ApiKeyStore(storage.db, storage.engine);
  const keyring = new SigningKeyring(storage.db);
  const tokens = new TokenService(storage.db, keyring, new ModelCatalog(storage.db), { issuer: 'arclight', audience: 'arclight' });
  await keyring.current();
  const server = createServer((req, res) => {
    const reply = (status: number, body: unknown) => {
      const text = JSON.stringify(body);
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      res.end(text);
    };
    if (req.method !== 'POST' || req.url !== '/tokens') return reply(404, { code: 'not_found', message: 'no route' });
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        try {
          const owner = await apiKeys.authenticate(String(req.headers['service-api-key'] ?? ''));
          if (!owner) throw new ArclightError('unauthorized', 'bad key');
          const text = Buffer.concat(chunks).toString();
          reply(200, await tokens.mint(owner, parseTokenRequest(text.trim() === '' ? {} : JSON.parse(text))));
        } catch (error) {
          const e = error instanceof ArclightError ? error : new ArclightError('internal_error', 'failed');
          reply(e.status ?? 500, e.toBody());
        }
      })();
    });
  });
  server.listen(0, '127.0.0.1', () => {
    process.stdout.write(`listening on http://127.0.0.1:${(server.address() as AddressInfo).port}\n`);
  });
}
