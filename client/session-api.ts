/**
 * The client's HTTP calls: opening, reading and ending sessions, and WebRTC signalling.
 * Local mode talks to a runtime's local endpoints (no token; `Bearer local` on transport calls,
 * as 2.9.0 does); hosted mode talks to the coordinator with the JWT.
 */

import { ArclightError } from '../protocol/errors.ts';
import type { SessionResponse } from '../protocol/session.ts';
import type {
  IceCandidatesRequest,
  IceServersResponse,
  RegisterConnectionResponse,
  SdpAnswerResponse,
  SdpOfferAccepted,
  SdpOfferRequest,
} from '../protocol/transport.ts';
import { API_ACCEPT_VERSION_HEADER, API_VERSION, API_VERSION_HEADER, WEBRTC_VERSION, WEBRTC_VERSION_HEADER } from '../protocol/versions.ts';
import type { CreateUploadRequest, CreateUploadResponse } from '../protocol/uploads.ts';
import { errorFromResponse } from './http-errors.ts';
import { resolveToken, type TokenSource } from './token.ts';

export interface SessionApiOptions {
  readonly baseUrl: string;
  readonly local: boolean;
  readonly modelName: string;
  readonly token: TokenSource | undefined;
  readonly signal?: AbortSignal;
}

/** `POST /sessions` tries (hosted), the n-th retry after n × 300 ms. */
const CREATE_ATTEMPTS = 3;
const CREATE_RETRY_DELAY_MS = 300;
/** Answers that say the request may not have been handled (gateways, a coordinator without its database). */
const RETRYABLE_CREATE_STATUSES = new Set([502, 503, 504]);

/** Session polling (hosted): 200 ms doubling up to 2 s, about 60 s in all. */
const SESSION_POLL_ATTEMPTS = 40;

export class SessionApi {
  readonly #options: SessionApiOptions;

  constructor(options: SessionApiOptions) {
    this.#options = options;
  }

  get local(): boolean {
    return this.#options.local;
  }

  /** Opens a session. Hosted: creates it and waits until the coordinator has placed it on a GPU. */
  async createSession(onWaiting: () => void): Promise<SessionResponse> {
    if (this.#options.local) {
      const session = await this.#request<SessionResponse>('POST', '/start_session', { body: {}, api: true });
      onWaiting();
      return session;
    }
    const created = await this.#createWithRetries();
    onWaiting();
    // Placed within the request (a free GPU): nothing to poll for.
    if (created.state !== 'CLOSED' && created.capabilities && created.selected_transport) return created;
    return this.#pollUntilPlaced(created.session_id);
  }

  /**
   * `POST /sessions` with an Idempotency-Key, retried with the same key when the answer is lost
   * (the coordinator unreachable, a 502/503/504 from it or a proxy): a retry of a request that did
   * create the session gets that session back, so a flaky network never opens (and bills) two.
   */
  async #createWithRetries(): Promise<SessionResponse> {
    const idempotencyKey = randomKey();
    const body = {
      model: { name: this.#options.modelName },
      client_info: { sdk_version: '0.1.0', sdk_type: 'js' },
      supported_transports: [{ protocol: 'webrtc', version: WEBRTC_VERSION }],
    };
    for (let attempt = 1; ; attempt++) {
      const last = attempt === CREATE_ATTEMPTS;
      try {
        const response = await this.#fetch('POST', '/sessions', { api: true, body, headers: { 'Idempotency-Key': idempotencyKey } });
        if (response.ok) return (await response.json()) as SessionResponse;
        if (last || !RETRYABLE_CREATE_STATUSES.has(response.status)) throw await errorFromResponse(response);
        await response.body?.cancel();
      } catch (error) {
        if (last || !(error instanceof ArclightError && error.code === 'connection_failed')) throw error;
      }
      await sleep(CREATE_RETRY_DELAY_MS * attempt, this.#options.signal);
    }
  }

  async getSession(sessionId: string): Promise<SessionResponse> {
    return this.#request<SessionResponse>('GET', `/sessions/${encodeURIComponent(sessionId)}`, { api: true });
  }

  /** Waits until the session has capabilities and a transport (hosted) — at once in local mode. */
  async attachSession(sessionId: string): Promise<SessionResponse> {
    const session = await this.getSession(sessionId);
    if (session.state === 'CLOSED') throw new ArclightError('session_ended', `Session ${sessionId} has ended.`);
    return session.capabilities && session.selected_transport ? session : this.#pollUntilPlaced(sessionId);
  }

  async endSession(sessionId: string): Promise<void> {
    if (this.#options.local) {
      await this.#request('POST', '/stop_session', { body: { session_id: sessionId }, api: true, allow: [404, 410] });
    } else {
      await this.#request('DELETE', `/sessions/${encodeURIComponent(sessionId)}`, { api: true, allow: [404, 410] });
    }
  }

  async iceServers(sessionId: string): Promise<RTCIceServer[]> {
    const body = await this.#request<IceServersResponse>('GET', `${transport(sessionId)}/ice_servers`, {});
    return body.ice_servers.map((s) => ({
      urls: [...s.uris],
      ...(s.credentials ? { username: s.credentials.username, credential: s.credentials.password } : {}),
    }));
  }

  async registerConnection(sessionId: string): Promise<RegisterConnectionResponse> {
    return this.#request<RegisterConnectionResponse>('POST', `${transport(sessionId)}/connections`, {});
  }

  /** Reserves an upload slot: presigned PUT and GET URLs (201). */
  async createUpload(sessionId: string, request: CreateUploadRequest): Promise<CreateUploadResponse> {
    return this.#request<CreateUploadResponse>('POST', `/sessions/${encodeURIComponent(sessionId)}/uploads`, { body: request, api: true });
  }

  async closeConnection(sessionId: string, connectionId: number): Promise<void> {
    await this.#request('DELETE', `${transport(sessionId)}/connections/${connectionId}`, { allow: [404, 410] });
  }

  /** Sends the offer; resolves with the answer when the runtime answered within the request (else poll `pollAnswer`). */
  async sendOffer(sessionId: string, connectionId: number, offer: SdpOfferRequest, renegotiate: boolean): Promise<string | undefined> {
    const accepted = await this.#request<SdpOfferAccepted | undefined>(
      renegotiate ? 'PUT' : 'POST',
      `${transport(sessionId)}/connections/${connectionId}/sdp_params`,
      { body: offer },
    );
    return typeof accepted?.sdp_answer === 'string' && accepted.sdp_answer !== '' ? accepted.sdp_answer : undefined;
  }

  /** Trickles candidates found after the offer to the connection's peer (and/or the end of them). */
  async sendIceCandidates(sessionId: string, connectionId: number, request: IceCandidatesRequest): Promise<void> {
    await this.#request('POST', `${transport(sessionId)}/connections/${connectionId}/ice_candidates`, { body: request });
  }

  /** Polls for the answer: 200 ms doubling, at most `maxAttempts` polls. */
  async pollAnswer(sessionId: string, connectionId: number, maxAttempts: number): Promise<string> {
    let delay = 200;
    for (let attempt = 1; attempt <= maxAttempts; attempt++) {
      const response = await this.#fetch('GET', `${transport(sessionId)}/connections/${connectionId}/sdp_params`, {});
      if (response.status === 200) return ((await response.json()) as SdpAnswerResponse).sdp_answer;
      if (response.status !== 202) throw this.#explained(await errorFromResponse(response), transport(sessionId));
      if (attempt < maxAttempts) await sleep(delay, this.#options.signal);
      delay = Math.min(delay * 2, 5_000);
    }
    throw new ArclightError('timeout', `No SDP answer after ${maxAttempts} polls.`);
  }

  /**
   * A 403 on a session the client already holds, with a token resolver: the usual cause is a
   * resolver that mints a new token per call (a new token has no bound sessions). Say so — the
   * coordinator's own message cannot know how the token was obtained.
   */
  #explained(error: ArclightError, path: string): ArclightError {
    const onHeldSession = path.startsWith('/sessions/');
    if (error.code !== 'forbidden' || !onHeldSession || typeof this.#options.token !== 'function' || this.#options.local) return error;
    return new ArclightError(
      error.code,
      `${error.message} The token resolver is called before every request of the session (ICE restarts, renegotiation, uploads, clips); a token minted afresh on each call is bound to no session and is refused. Cache the token (cacheToken) and mint only near expiry.`,
      { status: error.status, cause: error },
    );
  }

  async #pollUntilPlaced(sessionId: string): Promise<SessionResponse> {
    let delay = 200;
    for (let attempt = 0; attempt < SESSION_POLL_ATTEMPTS; attempt++) {
      const session = await this.getSession(sessionId);
      if (session.state === 'CLOSED') throw new ArclightError('session_ended', `Session ${sessionId} ended while waiting for a GPU.`);
      if (session.capabilities && session.selected_transport) return session;
      await sleep(delay, this.#options.signal);
      delay = Math.min(delay * 2, 2_000);
    }
    throw new ArclightError('timeout', `Session ${sessionId} was not placed on a GPU in time.`);
  }

  async #request<T = unknown>(method: string, path: string, options: { body?: unknown; api?: boolean; allow?: number[] }): Promise<T> {
    const response = await this.#fetch(method, path, options);
    if (!response.ok && !(options.allow ?? []).includes(response.status)) throw this.#explained(await errorFromResponse(response), path);
    const text = await response.text();
    return (text ? JSON.parse(text) : undefined) as T;
  }

  async #fetch(
    method: string,
    path: string,
    options: { body?: unknown; api?: boolean; headers?: Record<string, string> },
  ): Promise<Response> {
    const headers: Record<string, string> = { ...options.headers };
    if (options.api) {
      headers[API_VERSION_HEADER] = String(API_VERSION);
      headers[API_ACCEPT_VERSION_HEADER] = String(API_VERSION);
    } else {
      headers[WEBRTC_VERSION_HEADER] = WEBRTC_VERSION;
    }
    const token = await resolveToken(this.#options.token);
    if (token !== undefined) headers['Authorization'] = `Bearer ${token}`;
    else if (this.#options.local && !options.api) headers['Authorization'] = 'Bearer local';
    if (options.body !== undefined) headers['Content-Type'] = 'application/json';
    try {
      return await fetch(this.#options.baseUrl + path, {
        method,
        headers,
        ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
        ...(this.#options.signal ? { signal: this.#options.signal } : {}),
      });
    } catch (error) {
      if ((error as Error).name === 'AbortError') throw error;
      throw new ArclightError('connection_failed', `Could not reach ${this.#options.baseUrl}: ${(error as Error).message}`, {
        cause: error,
      });
    }
  }
}

/** 128 random bits as hex; getRandomValues, since randomUUID is missing from pages served over plain http. */
function randomKey(): string {
  const bytes = globalThis.crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

function transport(sessionId: string): string {
  return `/sessions/${encodeURIComponent(sessionId)}/transport/webrtc`;
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });
}
