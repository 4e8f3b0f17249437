/**
 * A moderator that asks an HTTP service: `POST <url>` with `{session_id, command, fields}`
 * (protocol/moderation.ts), optionally with `Authorization: Bearer <token>`, and expects 2xx
 * `{allowed, reason?, category?, field?}`. Any other answer — a non-2xx status, JSON that is not
 * a verdict, a network error, no answer in `timeoutMs` — throws, and the runtime admits the
 * command (fail-open) and counts `arclight_moderation_checks_total{outcome="error"}`.
 * `arclight serve --moderator-url` plugs it in.
 *
 * @example
 * ```ts
 * import { HttpModerator, startRuntime } from 'arclight/runtime';
 * await startRuntime({ model, moderation: { moderator: new HttpModerator({ url: 'http://moderation.internal/check', token: process.env.MOD_TOKEN }) } });
 * ```
 */

import { Ajv2020 } from 'ajv/dist/2020.js';
import { moderationCheckResponseSchema, type ModerationCheckRequest, type ModerationCheckResponse } from '../../protocol/moderation.ts';
import type { ModerationRequest, ModerationVerdict, Moderator } from './moderator.ts';

export interface HttpModeratorOptions {
  /** The service's check endpoint (http or https). */
  readonly url: string;
  /** Sent as `Authorization: Bearer <token>`. */
  readonly token?: string;
  /**
   * Gives up after this long. Default 2500 ms: the runtime already abandons a check (aborting
   * the request) when it admits the command at 2 s; this bounds a request the runtime would
   * wait on longer (a larger `admitAfterMs`), so no request is left open indefinitely.
   */
  readonly timeoutMs?: number;
}

const validateResponse = new Ajv2020({ strict: false }).compile<ModerationCheckResponse>(moderationCheckResponseSchema);

export class HttpModerator implements Moderator {
  readonly #url: URL;
  readonly #token: string | undefined;
  readonly #timeoutMs: number;

  /** @throws TypeError for a URL that is not http(s) or a timeout that is not positive. */
  constructor(options: HttpModeratorOptions) {
    let url: URL;
    try {
      url = new URL(options.url);
    } catch {
      throw new TypeError(`HttpModerator: "${options.url}" is not a URL`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:')
      throw new TypeError(`HttpModerator: the URL must be http(s); got "${options.url}"`);
    const timeoutMs = options.timeoutMs ?? 2_500;
    if (!(timeoutMs > 0) || !Number.isFinite(timeoutMs))
      throw new TypeError(`HttpModerator: timeoutMs must be positive; got ${String(options.timeoutMs)}`);
    this.#url = url;
    this.#token = options.token;
    this.#timeoutMs = timeoutMs;
  }

  async check(request: ModerationRequest): Promise<ModerationVerdict> {
    const body: ModerationCheckRequest = { session_id: request.sessionId, command: request.command, fields: request.fields };
    const response = await fetch(this.#url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json',
        ...(this.#token === undefined ? {} : { authorization: `Bearer ${this.#token}` }),
      },
      body: JSON.stringify(body),
      signal: AbortSignal.any([request.signal, AbortSignal.timeout(this.#timeoutMs)]),
      // A redirect would resend the text somewhere the operator did not configure.
      redirect: 'error',
    });
    if (!response.ok) {
      await response.body?.cancel().catch(() => {});
      throw new Error(`the moderation service answered HTTP ${response.status}`);
    }
    let answer: unknown;
    try {
      answer = await response.json();
    } catch {
      throw new Error('the moderation service answered with a body that is not JSON');
    }
    if (!validateResponse(answer)) {
      throw new Error(
        `the moderation service's answer is not {allowed: boolean, reason?, category?, field?}: ${JSON.stringify(answer).slice(0, 200)}`,
      );
    }
    if (answer.allowed) return { allowed: true };
    return {
      allowed: false,
      ...(answer.reason === undefined ? {} : { reason: answer.reason }),
      ...(answer.category === undefined ? {} : { category: answer.category }),
      ...(answer.field === undefined ? {} : { field: answer.field }),
    };
  }
}
