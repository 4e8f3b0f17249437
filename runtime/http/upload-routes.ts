/**
 * Uploads over HTTP (shaped for `@reactor-team/js-sdk@2.9.0`):
 *
 *   POST /sessions/{sid}/uploads              reserve a slot (session ready) → 201 presigned PUT and GET URLs
 *   PUT  /sessions/{sid}/uploads/{id}?expires&signature   the bytes (exactly the reserved size)
 *   GET  /sessions/{sid}/uploads/{id}?expires&signature   the bytes back
 *
 * The PUT and GET need no other credentials: the signed URL is the credential (url-signer.ts).
 * The URLs point at whoever the client reached: this runtime in local mode, or — when the
 * coordinator relays the reservation with the runtime secret — the coordinator's public address,
 * which relays the PUT and GET here in turn.
 */

import { Hono, type Context } from 'hono';
import { ArclightError } from '../../protocol/errors.ts';
import {
  DOWNLOAD_URL_LIFETIME_SECONDS,
  PUBLIC_URL_HEADER,
  UPLOAD_URL_LIFETIME_SECONDS,
  type CreateUploadResponse,
} from '../../protocol/uploads.ts';
import type { LocalSessionHost } from '../session/local-session-host.ts';
import type { UploadStore } from '../uploads/upload-store.ts';
import { requireSignature, type UrlSigner } from '../uploads/url-signer.ts';
import { checkApiVersion } from './versions.ts';
import { readBodyText } from '../../server-kit/body-limit.ts';
import { MAX_BODY_BYTES } from './json-body.ts';

export interface UploadRouteOptions {
  readonly host: LocalSessionHost;
  readonly store: UploadStore;
  readonly signer: UrlSigner;
  /** Hosted mode: every request here carries the runtime secret, so the coordinator's public URL header is trusted. */
  readonly trustPublicUrlHeader: boolean;
  readonly now?: () => number;
}

export function uploadRoutes(options: UploadRouteOptions): Hono {
  const { host, store, signer } = options;
  const now = options.now ?? Date.now;
  const app = new Hono();
  app.use('/sessions/:sid/uploads', checkApiVersion);

  app.post('/sessions/:sid/uploads', async (c) => {
    const session = host.get(c.req.param('sid'));
    if (!session.connections.some((connection) => connection.state === 'ready')) {
      throw new ArclightError('not_ready', 'Uploads need the session to be ready (a client connected).');
    }
    let body: unknown;
    try {
      body = JSON.parse(await readBodyText(c.req.raw, MAX_BODY_BYTES)) as unknown;
    } catch (error) {
      if (error instanceof ArclightError) throw error;
      throw new ArclightError('invalid_json', 'The body must be JSON: {name, size, mime_type}.');
    }
    const slot = store.reserve(session.id, body);
    // The session's log gets the slot, never its presigned URLs (they are credentials).
    const { size, mime_type: mimeType } = body as { size: number; mime_type: string };
    session.recordEvent('info', 'upload reserved', { upload_id: slot.upload_id, size, mime_type: mimeType });
    const path = `/sessions/${encodeURIComponent(session.id)}/uploads/${slot.upload_id}`;
    const base = publicBase(c, options.trustPublicUrlHeader);
    // One clock reading for both URLs: they are issued at the same instant.
    const issuedAt = now();
    const expiresAt = issuedAt + UPLOAD_URL_LIFETIME_SECONDS * 1000;
    const downloadExpiresAt = issuedAt + DOWNLOAD_URL_LIFETIME_SECONDS * 1000;
    const response: CreateUploadResponse = {
      presigned_id: slot.upload_id,
      presigned_url: base + signer.sign('PUT', path, expiresAt),
      path: `uploads/${slot.upload_id}`,
      download_url: base + signer.sign('GET', path, downloadExpiresAt),
      expires_at: Math.floor(expiresAt / 1000) * 1000,
      download_expires_at: Math.floor(downloadExpiresAt / 1000) * 1000,
    };
    return c.json(response, 201);
  });

  app.put('/sessions/:sid/uploads/:id', async (c) => {
    requireSignature(signer, 'PUT', new URL(c.req.url));
    const session = host.get(c.req.param('sid'));
    let reference;
    try {
      reference = await store.receive(session.id, c.req.param('id'), c.req.raw.body as never);
    } catch (error) {
      const code = error instanceof ArclightError ? error.code : 'internal_error';
      session.recordEvent('warn', `upload failed: ${code}`, { upload_id: c.req.param('id'), code });
      throw error;
    }
    session.recordEvent('info', 'upload received', {
      upload_id: reference.upload_id,
      size: reference.size,
      mime_type: reference.mime_type,
    });
    return c.json(reference, 200);
  });

  app.get('/sessions/:sid/uploads/:id', (c) => {
    requireSignature(signer, 'GET', new URL(c.req.url));
    const session = host.get(c.req.param('sid'));
    const file = store.file(session.id, c.req.param('id'));
    return new Response(file.stream() as unknown as ReadableStream, {
      headers: {
        'content-type': file.mimeType,
        'content-length': String(file.size),
        'content-disposition': `attachment; filename*=UTF-8''${encodeURIComponent(file.name)}`,
        'cache-control': 'private, no-store',
      },
    });
  });
  return app;
}

/** The origin the client reached: the coordinator's (relayed, hosted) or this runtime's. */
function publicBase(c: Context, trustHeader: boolean): string {
  const relayed = trustHeader ? c.req.header(PUBLIC_URL_HEADER) : undefined;
  if (relayed && /^https?:\/\/[^/?#]+$/.test(relayed)) return relayed;
  return new URL(c.req.url).origin;
}
