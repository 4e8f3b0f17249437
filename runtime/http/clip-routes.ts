/**
 * Clips over HTTP, presigned (the URL is the credential; 24 hours):
 *
 *   GET /sessions/{sid}/clips/{clip}/playlist.m3u8?expires&signature    the clip's HLS playlist
 *   GET /sessions/{sid}/recording/{track}/{file}?expires&signature      init.mp4 / seg-NNNNN.m4s
 *
 * More than five minutes after the session ended, both answer 410 `recording_gone`.
 */

import { Hono } from 'hono';
import type { RecordingRegistry } from '../recording/recording-registry.ts';
import { requireSignature, type UrlSigner } from '../uploads/url-signer.ts';

export function clipRoutes(recordings: RecordingRegistry, signer: UrlSigner): Hono {
  const app = new Hono();
  app.get('/sessions/:sid/clips/:clip/playlist.m3u8', (c) => {
    const url = new URL(c.req.url);
    requireSignature(signer, 'GET', url);
    const body = recordings.playlist(c.req.param('sid'), c.req.param('clip'), Number(url.searchParams.get('expires')));
    return c.body(body, 200, { 'content-type': 'application/vnd.apple.mpegurl', 'cache-control': 'private, max-age=60' });
  });
  app.get('/sessions/:sid/recording/:track/:file', async (c) => {
    requireSignature(signer, 'GET', new URL(c.req.url));
    const file = c.req.param('file');
    const bytes = await recordings.file(c.req.param('sid'), c.req.param('track'), file);
    return c.body(new Uint8Array(bytes), 200, {
      'content-type': file.endsWith('.mp4') ? 'video/mp4' : 'video/iso.segment',
      'content-length': String(bytes.length),
      // Segments never change once written.
      'cache-control': 'private, max-age=86400, immutable',
    });
  });
  return app;
}
