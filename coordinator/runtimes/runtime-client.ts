/**
 * The coordinator's calls to a runtime: open a session there (with the coordinator's session id),
 * end it, and relay a client's transport call. All carry the runtime secret.
 */

import { RUNTIME_SECRET_HEADER } from '../../protocol/coordinator.ts';
import { PUBLIC_URL_HEADER } from '../../protocol/uploads.ts';
import { API_VERSION_HEADER } from '../../protocol/versions.ts';
import { ArclightError } from '../../protocol/errors.ts';
import type { RuntimeRecord } from './runtime-registry.ts';

/** Headers passed through on a relayed transport call, both ways. */
const RELAYED_REQUEST_HEADERS = ['content-type', 'reactor-webrtc-version'];
const CALL_TIMEOUT_MS = 10_000;
/** A file upload or download through the coordinator may take a while on a slow link. */
const UPLOAD_TIMEOUT_MS = 10 * 60_000;

export class RuntimeClient {
  readonly #secret: string | undefined;
  readonly #reconnectWindowSeconds: number;

  #publicUrl: string | undefined;

  /** `reconnectWindowSeconds`: how long a runtime keeps a session after its last client left. */
  constructor(secret: string | undefined, reconnectWindowSeconds: number) {
    this.#secret = secret;
    this.#reconnectWindowSeconds = reconnectWindowSeconds;
  }

  /** The coordinator's public origin (known once it listens, or configured). */
  set publicUrl(url: string) {
    this.#publicUrl = url.replace(/\/+$/, '');
  }

  /** Opens the session on the runtime; throws when the runtime refuses or cannot be reached. */
  async startSession(runtime: RuntimeRecord, sessionId: string, maxDurationSeconds: number): Promise<void> {
    const body = {
      session_id: sessionId,
      max_duration_seconds: maxDurationSeconds,
      reconnect_window_seconds: this.#reconnectWindowSeconds,
      // Where clients reach the session over HTTP: the runtime's clip URLs point here.
      ...(this.#publicUrl ? { public_url: this.#publicUrl } : {}),
    };
    const response = await this.#call(runtime, 'POST', '/hosted/sessions', JSON.stringify(body));
    if (!response.ok) throw new Error(`runtime ${runtime.id} refused session ${sessionId}: ${response.status} ${await response.text()}`);
  }

  /**
   * Ends the session on the runtime, which tells its clients `reason` first. Never throws: true
   * when the runtime no longer holds it (it ended it now, or had already: 404/410), false when it
   * could not be told (unreachable, or an error) — then the slot stays taken and housekeeping
   * tells it again.
   */
  async endSession(runtime: RuntimeRecord, sessionId: string, reason: string): Promise<boolean> {
    try {
      const response = await this.#call(runtime, 'DELETE', `/hosted/sessions/${encodeURIComponent(sessionId)}`, JSON.stringify({ reason }));
      await response.arrayBuffer();
      return response.ok || response.status === 404 || response.status === 410;
    } catch {
      return false;
    }
  }

  /** Relays a client's transport call (`/sessions/{id}/transport/webrtc/…`) and returns the runtime's answer as is. */
  async relay(runtime: RuntimeRecord, request: Request, path: string): Promise<Response> {
    const headers: Record<string, string> = {};
    for (const name of RELAYED_REQUEST_HEADERS) {
      const value = request.headers.get(name);
      if (value !== null) headers[name] = value;
    }
    const body = request.method === 'GET' || request.method === 'HEAD' ? undefined : await request.text();
    let response: Response;
    try {
      response = await this.#call(runtime, request.method, path, body, headers);
    } catch (error) {
      throw new ArclightError('internal_error', 'The GPU serving this session could not be reached.', { cause: error, retryable: true });
    }
    const text = await response.text();
    return new Response(text === '' && (response.status === 202 || response.status === 204) ? null : text, {
      status: response.status,
      headers: { 'content-type': response.headers.get('content-type') ?? 'application/json' },
    });
  }

  /**
   * Relays an upload call (reserve, or the presigned PUT/GET) with its body and answer streamed —
   * a file is never held whole in the coordinator. `publicUrl`: the coordinator's origin as the
   * client reached it, so the runtime's presigned URLs point back here.
   */
  async relayUpload(runtime: RuntimeRecord, request: Request, pathAndQuery: string, publicUrl: string): Promise<Response> {
    const headers: Record<string, string> = { [PUBLIC_URL_HEADER]: publicUrl };
    for (const name of ['content-type', 'content-length', API_VERSION_HEADER.toLowerCase()]) {
      const value = request.headers.get(name);
      if (value !== null) headers[name] = value;
    }
    if (this.#secret) headers[RUNTIME_SECRET_HEADER] = this.#secret;
    const hasBody = request.method !== 'GET' && request.method !== 'HEAD' && request.body !== null;
    let response: Response;
    try {
      response = await fetch(`${runtime.url}${pathAndQuery}`, {
        method: request.method,
        headers,
        ...(hasBody ? { body: request.body, duplex: 'half' } : {}),
        signal: AbortSignal.timeout(UPLOAD_TIMEOUT_MS),
      } as RequestInit);
    } catch (error) {
      throw new ArclightError('internal_error', 'The GPU serving this session could not be reached.', { cause: error, retryable: true });
    }
    const passed = new Headers();
    for (const name of ['content-type', 'content-length', 'content-disposition', 'cache-control']) {
      const value = response.headers.get(name);
      if (value !== null) passed.set(name, value);
    }
    return new Response(response.body, { status: response.status, headers: passed });
  }

  /**
   * Relays a read that may stay open (a session's log, paged or as server-sent events): the
   * runtime's answer is passed on as it arrives, never buffered, and the call to the runtime is
   * dropped when the client goes away. Only the answer's start is bounded in time.
   */
  async relayStream(runtime: RuntimeRecord, request: Request, pathAndQuery: string): Promise<Response> {
    const headers: Record<string, string> = { accept: request.headers.get('accept') ?? '*/*' };
    const lastEventId = request.headers.get('last-event-id');
    if (lastEventId !== null) headers['last-event-id'] = lastEventId;
    if (this.#secret) headers[RUNTIME_SECRET_HEADER] = this.#secret;
    const upstream = new AbortController();
    const abort = (): void => upstream.abort();
    request.signal.addEventListener('abort', abort, { once: true });
    const startTimer = setTimeout(() => upstream.abort(new Error('the runtime did not answer in time')), CALL_TIMEOUT_MS);
    let response: Response;
    try {
      response = await fetch(`${runtime.url}${pathAndQuery}`, { method: 'GET', headers, signal: upstream.signal });
    } catch (error) {
      request.signal.removeEventListener('abort', abort);
      throw new ArclightError('internal_error', 'The GPU serving this session could not be reached.', { cause: error, retryable: true });
    } finally {
      clearTimeout(startTimer);
    }
    const passed = new Headers();
    for (const name of ['content-type', 'cache-control', 'x-accel-buffering']) {
      const value = response.headers.get(name);
      if (value !== null) passed.set(name, value);
    }
    return new Response(response.body, { status: response.status, headers: passed });
  }

  #call(runtime: RuntimeRecord, method: string, path: string, body?: string, headers: Record<string, string> = {}): Promise<Response> {
    return fetch(`${runtime.url}${path}`, {
      method,
      headers: { 'content-type': 'application/json', ...headers, ...(this.#secret ? { [RUNTIME_SECRET_HEADER]: this.#secret } : {}) },
      ...(body === undefined ? {} : { body }),
      signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
    });
  }
}
