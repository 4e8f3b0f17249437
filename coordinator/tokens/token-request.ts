/**
 * Reads a `POST /tokens` body into what to mint, with the spec's rules for shape and bounds.
 * Database checks (model visibility, bind) come after, in token-service.ts. Every refusal here
 * is a 400 `invalid_request` naming the field (a JSON pointer).
 */

import { ArclightError } from '../../protocol/errors.ts';
import {
  DEFAULT_TOKEN_LIFETIME_SECONDS,
  MAX_SESSIONS_RANGE,
  MAX_TOKEN_LIFETIME_SECONDS,
  SESSION_DURATION_RANGE,
} from '../../protocol/coordinator.ts';

/** What a session-scoped token asks for, before database checks. */
export interface SessionGrant {
  /** Model slugs, de-duplicated, in request order. */
  readonly models: readonly string[];
  /** As requested; the default depends on `bind` (see resolveMaxSessions). */
  readonly maxSessions: number | undefined;
  readonly maxSessionDurationSeconds: number | undefined;
  /** Session ids to bind, de-duplicated; empty when not given. */
  readonly bind: readonly string[];
}

export interface ParsedTokenRequest {
  /** Undefined: an unscoped token. */
  readonly grant: SessionGrant | undefined;
  /** After clamping to the ceiling. */
  readonly lifetimeSeconds: number;
}

/** Longest model slug or session id accepted (longer cannot be ours). */
const MAX_ID_LENGTH = 128;
/** Entries in `match` or `bind`: more than max_sessions could ever use is a mistake. */
const MAX_LIST_LENGTH = 500;

function invalid(field: string, message: string): ArclightError {
  return new ArclightError('invalid_request', message, { field });
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function integerIn(value: unknown, field: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw invalid(field, `${field.split('/').pop()} must be an integer from ${min} to ${max}.`);
  }
  return value;
}

function stringList(value: unknown, field: string, what: string): string[] {
  if (!Array.isArray(value) || value.length === 0) throw invalid(field, `${what} must be a non-empty array.`);
  if (value.length > MAX_LIST_LENGTH) throw invalid(field, `${what} may list at most ${MAX_LIST_LENGTH} entries.`);
  const out: string[] = [];
  value.forEach((item, index) => {
    if (typeof item !== 'string' || item.length === 0 || item.length > MAX_ID_LENGTH) {
      throw invalid(`${field}/${index}`, `${what} entries must be non-empty strings of at most ${MAX_ID_LENGTH} characters.`);
    }
    if (!out.includes(item)) out.push(item);
  });
  return out;
}

export function parseTokenRequest(body: unknown): ParsedTokenRequest {
  if (!isObject(body)) throw invalid('', 'The body must be a JSON object.');
  let lifetimeSeconds = DEFAULT_TOKEN_LIFETIME_SECONDS;
  if (body['expires_after'] !== undefined) {
    const requested = body['expires_after'];
    if (typeof requested !== 'number' || !Number.isInteger(requested) || requested < 1) {
      throw invalid('/expires_after', 'expires_after must be a positive integer number of seconds.');
    }
    lifetimeSeconds = Math.min(requested, MAX_TOKEN_LIFETIME_SECONDS);
  }
  const details = body['authorization_details'];
  if (details === undefined) return { grant: undefined, lifetimeSeconds };
  // RFC 9396 form is an array; a single object is accepted too.
  const entries = Array.isArray(details) ? details : [details];
  const base = Array.isArray(details) ? '/authorization_details/0' : '/authorization_details';
  if (entries.length !== 1) {
    throw invalid('/authorization_details', 'authorization_details must hold exactly one entry of type "session".');
  }
  const entry: unknown = entries[0];
  if (!isObject(entry)) throw invalid(base, 'An authorization_details entry must be an object.');
  if (entry['type'] !== 'session') throw invalid(`${base}/type`, 'type must be "session", the only type supported.');
  const resources = entry['resources'];
  if (!isObject(resources)) throw invalid(`${base}/resources`, 'resources.models.match is required.');
  const models = resources['models'];
  if (!isObject(models)) throw invalid(`${base}/resources/models`, 'resources.models.match is required.');
  const match = stringList(models['match'], `${base}/resources/models/match`, 'resources.models.match');
  const wildcard = match.findIndex((name) => name.includes('*'));
  if (wildcard >= 0)
    throw invalid(`${base}/resources/models/match/${wildcard}`, 'Model names are matched exactly; wildcards are not supported.');
  let bind: string[] = [];
  if (resources['sessions'] !== undefined) {
    const sessions = resources['sessions'];
    if (!isObject(sessions)) throw invalid(`${base}/resources/sessions`, 'resources.sessions must be an object with bind.');
    bind = stringList(sessions['bind'], `${base}/resources/sessions/bind`, 'resources.sessions.bind');
  }
  let maxSessions: number | undefined;
  let maxSessionDurationSeconds: number | undefined;
  const constraints = entry['constraints'];
  if (constraints !== undefined) {
    if (!isObject(constraints)) throw invalid(`${base}/constraints`, 'constraints must be an object.');
    if (constraints['max_sessions'] !== undefined) {
      maxSessions = integerIn(
        constraints['max_sessions'],
        `${base}/constraints/max_sessions`,
        MAX_SESSIONS_RANGE.min,
        MAX_SESSIONS_RANGE.max,
      );
    }
    if (constraints['max_session_duration_seconds'] !== undefined) {
      maxSessionDurationSeconds = integerIn(
        constraints['max_session_duration_seconds'],
        `${base}/constraints/max_session_duration_seconds`,
        SESSION_DURATION_RANGE.min,
        SESSION_DURATION_RANGE.max,
      );
    }
  }
  if (maxSessions !== undefined && bind.length > maxSessions) {
    throw invalid(`${base}/constraints/max_sessions`, `max_sessions (${maxSessions}) is smaller than the ${bind.length} sessions to bind.`);
  }
  return { grant: { models: match, maxSessions, maxSessionDurationSeconds, bind }, lifetimeSeconds };
}

/**
 * max_sessions caps the token's bound set: the sessions bound at minting count toward it, and
 * each session the token creates adds one. Default 5; with bind, the number of bound sessions —
 * so a bind-only token cannot create (pass a larger max_sessions when it must).
 */
export function resolveMaxSessions(grant: SessionGrant): number {
  return grant.maxSessions ?? (grant.bind.length > 0 ? grant.bind.length : MAX_SESSIONS_RANGE.default);
}
