/**
 * An account's usage: its sessions created since a moment, each with the seconds and credits the
 * meter charged it, and the totals. What `GET /platform/usage` serves and `arclight admin usage`
 * prints.
 */

import type { Kysely } from 'kysely';
import type { CoordinatorDatabase, SessionStatus } from '../storage/schema.ts';

/** Sessions per report, newest first. */
export const MAX_USAGE_ROWS = 1000;
/** The default window: the last 30 days. */
export const DEFAULT_USAGE_WINDOW_MS = 30 * 86_400_000;

export interface UsageReport {
  /** Milliseconds since the epoch. */
  readonly since: number;
  readonly sessions: ReadonlyArray<{
    readonly session_id: string;
    readonly model: string;
    readonly status: SessionStatus;
    readonly created_at: number;
    readonly ready_at: number | null;
    readonly ended_at: number | null;
    readonly billed_seconds: number;
    readonly credits: number;
  }>;
  readonly total: { readonly billed_seconds: number; readonly credits: number };
}

export async function usageReport(db: Kysely<CoordinatorDatabase>, accountId: string, since: number): Promise<UsageReport> {
  const rows = await db
    .selectFrom('sessions as s')
    .innerJoin('models as m', 'm.id', 's.model_id')
    .leftJoin('meter_ticks as t', 't.session_id', 's.id')
    .select((eb) => [
      's.id',
      'm.name',
      's.status',
      's.created_at',
      's.ready_at',
      's.ended_at',
      eb.fn.sum<number | string | null>('t.seconds').as('seconds'),
      eb.fn.sum<number | string | null>('t.credits').as('credits'),
    ])
    .where('s.account_id', '=', accountId)
    .where('s.created_at', '>=', since)
    .groupBy(['s.id', 'm.name', 's.status', 's.created_at', 's.ready_at', 's.ended_at'])
    .orderBy('s.created_at', 'desc')
    .limit(MAX_USAGE_ROWS)
    .execute();
  const sessions = rows.map((r) => ({
    session_id: r.id,
    model: r.name,
    status: r.status,
    created_at: r.created_at,
    ready_at: r.ready_at,
    ended_at: r.ended_at,
    billed_seconds: Number(r.seconds ?? 0),
    credits: Number(r.credits ?? 0),
  }));
  return {
    since,
    sessions,
    total: { billed_seconds: sessions.reduce((s, r) => s + r.billed_seconds, 0), credits: sessions.reduce((s, r) => s + r.credits, 0) },
  };
}
