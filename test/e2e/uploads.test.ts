/**
 * Uploads in local mode, with real peers (werift runtime, wrtc Node client) and real HTTP: the
 * client reserves a slot, PUTs the bytes to the presigned URL, the model's `file_uploaded` hook
 * fires, and a command given the file reference reads exactly those bytes; the presigned download
 * URL returns them. Forged, altered and expired URLs are refused; so are uploads before the
 * session is ready, files over the size limit or of a refused type, and PUTs of the wrong length.
 */

import { createHash, randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ArclightClient } from '../../client/node.ts';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import uploadModel, { uploadedFiles } from '../fixtures/upload-model.ts';
import { waitUntil } from '../support/video-probe.ts';

const LOOPBACK = '127.0.0.1';
const MAX_BYTES = 1024 * 1024;
const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');
const API_HEADERS = { 'content-type': 'application/json', 'Reactor-API-Version': '1' };

describe('uploads (local mode)', () => {
  let runtime: Runtime;
  let now = Date.now();
  /**
   * Clock readings handed out before `now`, one per read: a reservation reads the runtime's
   * upload clock once (for both URLs), and so does a PUT's signature check.
   */
  let stale: number[] = [];
  const clients: ArclightClient[] = [];
  const connected = async () => {
    const client = new ArclightClient({ modelName: 'upload-model', local: true, localRuntimeUrl: runtime.url });
    clients.push(client);
    await client.connect();
    return client;
  };
  const reserve = (sessionId: string, body: unknown) =>
    fetch(`${runtime.url}/sessions/${sessionId}/uploads`, { method: 'POST', headers: API_HEADERS, body: JSON.stringify(body) }).then(
      async (r) => ({
        status: r.status,
        body: (await r.json()) as Record<string, any>,
      }),
    );
  const put = (url: string, body: string) =>
    fetch(url, { method: 'PUT', body }).then(async (r) => ({ status: r.status, body: (await r.json()) as Record<string, any> }));

  beforeAll(async () => {
    runtime = await startRuntime({
      model: uploadModel as never,
      port: 0,
      host: LOOPBACK,
      ice: { hostAddresses: [LOOPBACK] },
      playground: false,
      uploads: { maxBytes: MAX_BYTES, mimeTypes: ['image/*', 'application/octet-stream'], now: () => stale.shift() ?? now },
    });
  });
  afterEach(async () => {
    now = Date.now();
    stale = [];
    for (const client of clients.splice(0)) await client.disconnect().catch(() => {});
  });
  afterAll(async () => runtime?.close());

  it('uploads through the presigned URL; the hook fires; a command reads the bytes; the download URL returns them', async () => {
    const client = await connected();
    const bytes = new Uint8Array(randomBytes(200_000));
    const ref = await client.uploadFile(new Blob([bytes], { type: 'image/png' }), { name: 'picture.png' });
    expect(ref).toMatchObject({ name: 'picture.png', mimeType: 'image/png', size: 200_000 });
    expect(uploadedFiles.at(-1)).toMatchObject({ name: 'picture.png', size: 200_000, mimeType: 'image/png' }); // hook ran before uploadFile resolved
    const reply = await client.sendCommand('inspect', { file: ref, label: 'first' });
    // The handler reached the same bytes through read(), stream() and its path on disk.
    const digest = sha256(bytes);
    expect(reply?.data).toEqual({
      label: 'first',
      name: 'picture.png',
      mime_type: 'image/png',
      size: 200_000,
      sha256: digest,
      stream_sha256: digest,
      path_sha256: digest,
    });
    const downloaded = await fetch(ref.downloadUrl!);
    expect(downloaded.status).toBe(200);
    expect(downloaded.headers.get('content-type')).toBe('image/png');
    expect(sha256(new Uint8Array(await downloaded.arrayBuffer()))).toBe(sha256(bytes));
    // Names default to the File's, then `upload` for a bare Blob.
    expect((await client.uploadFile(new File([bytes.slice(0, 10)], 'data.bin', { type: 'application/octet-stream' }))).name).toBe(
      'data.bin',
    );
    expect((await client.uploadFile(new Blob([bytes.slice(0, 10)]))).name).toBe('upload');
  }, 60_000);

  it('refuses forged and altered URLs (403 forbidden) and expired ones (403 url_expired); a new slot works', async () => {
    const client = await connected();
    const sessionId = client.getSessionId()!;
    const slot = (await reserve(sessionId, { name: 'a.png', size: 4, mime_type: 'image/png' })).body;
    expect(slot.expires_at - now).toBeGreaterThan(14 * 60_000); // 15 minutes (to the second)
    expect(slot.download_expires_at - now).toBeGreaterThan(4 * 60_000); // 5 minutes (to the second)
    expect(slot.download_expires_at - now).toBeLessThanOrEqual(5 * 60_000);
    expect(slot.expires_at - now).toBeLessThanOrEqual(15 * 60_000);
    const url = new URL(slot.presigned_url);
    const flipped = url.searchParams.get('signature')!.replace(/^./, (c) => (c === '0' ? '1' : '0'));
    const forged = new URL(url);
    forged.searchParams.set('signature', flipped);
    expect((await put(forged.href, 'abcd')).body.code).toBe('forbidden');
    const extended = new URL(url);
    extended.searchParams.set('expires', String(Number(url.searchParams.get('expires')) + 3600)); // can't be extended
    expect((await put(extended.href, 'abcd')).body.code).toBe('forbidden');
    const other = (await reserve(sessionId, { name: 'b.png', size: 4, mime_type: 'image/png' })).body;
    const swapped = new URL(url);
    swapped.pathname = new URL(other.presigned_url).pathname; // another upload with this one's signature
    expect((await put(swapped.href, 'abcd')).body.code).toBe('forbidden');
    expect((await fetch(slot.presigned_url)).status).toBe(403); // a PUT URL does not GET
    now += 15 * 60_000 + 1_000;
    const expired = await put(slot.presigned_url, 'abcd');
    expect(expired).toMatchObject({ status: 403, body: { code: 'url_expired' } });
    const fresh = (await reserve(sessionId, { name: 'a.png', size: 4, mime_type: 'image/png' })).body;
    expect((await put(fresh.presigned_url, 'abcd')).status).toBe(200);
  }, 60_000);

  it('refuses uploads before the session is ready, oversized and refused types, and PUTs of the wrong length', async () => {
    // A session with no client connected is not ready.
    const started = await fetch(`${runtime.url}/start_session`, { method: 'POST', headers: API_HEADERS, body: '{}' });
    const { session_id: idle } = (await started.json()) as { session_id: string };
    expect((await reserve(idle, { name: 'a.png', size: 4, mime_type: 'image/png' })).body.code).toBe('not_ready');
    await fetch(`${runtime.url}/stop_session`, { method: 'POST', headers: API_HEADERS, body: JSON.stringify({ session_id: idle }) });
    const early = new ArclightClient({ modelName: 'upload-model', local: true, localRuntimeUrl: runtime.url });
    await expect(early.uploadFile(new Blob(['x']))).rejects.toMatchObject({ code: 'not_ready' });

    const client = await connected();
    const sessionId = client.getSessionId()!;
    expect((await reserve(sessionId, { name: 'big.png', size: MAX_BYTES + 1, mime_type: 'image/png' })).body).toMatchObject({
      code: 'payload_too_large',
      field: '/size',
    });
    expect((await reserve(sessionId, { name: 'a.pdf', size: 10, mime_type: 'application/pdf' })).body).toMatchObject({
      code: 'unsupported_media_type',
      field: '/mime_type',
    });
    expect((await reserve(sessionId, { name: '../etc/passwd', size: 10, mime_type: 'image/png' })).body).toMatchObject({
      code: 'invalid_request',
      field: '/name',
    });
    expect((await reserve(sessionId, { name: 'a.png', size: 0, mime_type: 'image/png' })).body).toMatchObject({
      code: 'invalid_request',
      field: '/size',
    });
    await expect(client.uploadFile(new Blob(['%PDF'], { type: 'application/pdf' }))).rejects.toMatchObject({
      code: 'unsupported_media_type',
    });
    const long = (await reserve(sessionId, { name: 'a.png', size: 4, mime_type: 'image/png' })).body;
    expect(await put(long.presigned_url, 'abcdef')).toMatchObject({ status: 413, body: { code: 'payload_too_large' } });
    const short = (await reserve(sessionId, { name: 'a.png', size: 4, mime_type: 'image/png' })).body;
    expect(await put(short.presigned_url, 'ab')).toMatchObject({ status: 400, body: { code: 'invalid_request' } });
  }, 60_000);

  it('the download URL expires after 5 minutes (403 url_expired); the reference still works in commands', async () => {
    const client = await connected();
    const bytes = new Uint8Array(randomBytes(1_000));
    const ref = await client.uploadFile(new Blob([bytes], { type: 'image/png' }), { name: 'late.png' });
    expect(ref.downloadExpiresAt! - now).toBeLessThanOrEqual(5 * 60_000);
    expect((await fetch(ref.downloadUrl!)).status).toBe(200);
    now += 5 * 60_000 + 1_000;
    const expired = await fetch(ref.downloadUrl!);
    expect(expired.status).toBe(403);
    expect(((await expired.json()) as { code: string }).code).toBe('url_expired');
    // The model gets the file by its id, not through the URL: the reference outlives the URL.
    const reply = await client.sendCommand('inspect', { file: ref, label: 'late' });
    expect(reply?.data).toMatchObject({ name: 'late.png', size: 1_000, sha256: sha256(bytes) });
  }, 60_000);

  it('uploadFile reserves a fresh slot once when its PUT URL has expired, and gives up after a second expiry', async () => {
    const client = await connected();
    const bytes = new Uint8Array(randomBytes(2_000));
    // The runtime's clock reads 16 minutes early for the next reservation only: the PUT URL it
    // signs is already past its 15 minutes when the PUT (read on the true clock) arrives.
    stale = [Date.now() - 16 * 60_000];
    const hooksBefore = uploadedFiles.length;
    const ref = await client.uploadFile(new Blob([bytes], { type: 'image/png' }), { name: 'retried.png' });
    expect(stale).toEqual([]); // the first reservation was the stale one
    expect(uploadedFiles.length).toBe(hooksBefore + 1); // announced once, for the fresh slot
    expect((await client.sendCommand('inspect', { file: ref }))?.data).toMatchObject({ name: 'retried.png', sha256: sha256(bytes) });

    // Two stale reservations in a row (reads: reserve, PUT check, reserve again): one retry, then
    // the url_expired answer is the result.
    const t = Date.now();
    stale = [t - 16 * 60_000, t, t - 16 * 60_000];
    await expect(client.uploadFile(new Blob([bytes], { type: 'image/png' }))).rejects.toMatchObject({ code: 'url_expired', status: 403 });
    expect(stale).toEqual([]);
    expect(uploadedFiles.length).toBe(hooksBefore + 1);
  }, 60_000);

  it('a command naming an unknown or unfinished upload fails on that field; the files go with the session', async () => {
    const client = await connected();
    const sessionId = client.getSessionId()!;
    const pending = (await reserve(sessionId, { name: 'a.png', size: 4, mime_type: 'image/png' })).body;
    const { FileRef } = await import('../../client/index.ts');
    await expect(client.sendCommand('inspect', { file: new FileRef(pending.presigned_id, 'a.png', 'image/png', 4) })).rejects.toMatchObject(
      { code: 'invalid_params', field: '/file' },
    );
    await expect(client.sendCommand('inspect', { file: new FileRef('no-such-upload', 'a.png', 'image/png', 4) })).rejects.toMatchObject({
      code: 'invalid_params',
      field: '/file',
    });
    const ref = await client.uploadFile(new Blob(['abcd'], { type: 'image/png' }));
    await client.disconnect(); // ends the session: its files are deleted
    await waitUntil(() => runtime.sessions.current === undefined, 10_000, 'the session to end');
    expect((await fetch(ref.downloadUrl!)).status).toBe(410);
  }, 60_000);
});
