/**
 * An account's usage: its sessions created in a window, each with the seconds and credits the
 * meter charged it and the API key whose token created it, the totals, and the same totals per
 * model and per day charged. What `GET /platform/usage` serves and `arclight admin usage` prints.
 */

import { sql, type Kysely } from 'kysely';
import type { CoordinatorDatabase, SessionStatus } from '../storage/schema.ts';

/** Sessions listed per report, newest first (the totals cover the whole window). */
export const MAX_USAGE_ROWS = 1000;
/** The default window: the last 30 days. */
export const DEFAULT_USAGE_WINDOW_MS = 30 * 86_400_000;
const DAY_MS = 86_400_000;

export interface UsageOptions {
  /** Sessions created before this (ms since the epoch, exclusive); default: no end. */
  readonly until?: number;
  /** Only sessions created with tokens minted by this API key. */
  readonly keyId?: string;
}

export interface UsageReport {
  /** Milliseconds since the epoch. */
  readonly since: number;
  /** Exclusive end of the window, or null for none. */
  readonly until: number | null;
  readonly sessions: ReadonlyArray<{
    readonly session_id: string;
    readonly model: string;
    /** The API key whose token created the session (it may be revoked or rotated since). */
    readonly key_id: string | null;
    readonly status: SessionStatus;
    readonly created_at: number;
    readonly ready_at: number | null;
    readonly ended_at: number | null;
    readonly billed_seconds: number;
    readonly credits: number;
  }>;
  /** Every session of the window, listed or not. */
  readonly total: { readonly billed_seconds: number; readonly credits: number };
  /** The window's sessions (listed or not) by model, most credits first. */
  readonly by_model: ReadonlyArray<{
    readonly model: string;
    readonly sessions: number;
    readonly billed_seconds: number;
    readonly credits: number;
  }>;
  /**
   * What the window's sessions were charged, by the UTC day the meter charged it (`YYYY-MM-DD`),
   * oldest first; days without charges are left out. Sums to `total`.
   */
  readonly by_day: ReadonlyArray<{ readonly day: string; readonly billed_seconds: number; readonly credits: number }>;
  /** More sessions were created in the window than the MAX_USAGE_ROWS newest listed. */
  readonly truncated: boolean;
}

export async function usageReport(
  db: Kysely<CoordinatorDatabase>,
  accountId: string,
  since: number,
  options: UsageOptions = {},
): Promise<UsageReport> {
  const { until, keyId } = options;
  const rows = await db
    .selectFrom('sessions as s')
    .innerJoin('models as m', 'm.id', 's.model_id')
    .leftJoin('tokens as k', 'k.id', 's.token_id')
    .leftJoin('meter_ticks as t', 't.session_id', 's.id')
    .select((eb) => [
      's.id',
      'm.name',
      'k.api_key_id',
      's.status',
      's.created_at',
      's.ready_at',
      's.ended_at',
      eb.fn.sum<number | string | null>('t.seconds').as('seconds'),
      eb.fn.sum<number | string | null>('t.credits').as('credits'),
    ])
    .where('s.account_id', '=', accountId)
    .where('s.created_at', '>=', since)
    .$if(until !== undefined, (q) => q.where('s.created_at', '<', until!))
    .$if(keyId !== undefined, (q) => q.where('k.api_key_id', '=', keyId!))
    .groupBy(['s.id', 'm.name', 'k.api_key_id', 's.status', 's.created_at', 's.ready_at', 's.ended_at'])
    .orderBy('s.created_at', 'desc')
    .orderBy('s.id')
    .limit(MAX_USAGE_ROWS + 1)
    .execute();
  const truncated = rows.length > MAX_USAGE_ROWS;
  const sessions = rows.slice(0, MAX_USAGE_ROWS).map((r) => ({
    session_id: r.id,
    model: r.name,
    key_id: r.api_key_id,
    status: r.status,
    created_at: r.created_at,
    ready_at: r.ready_at,
    ended_at: r.ended_at,
    billed_seconds: Number(r.seconds ?? 0),
    credits: Number(r.credits ?? 0),
  }));
  let total = { billed_seconds: sessions.reduce((s, r) => s + r.billed_seconds, 0), credits: sessions.reduce((s, r) => s + r.credits, 0) };
  if (truncated) {
    // The listed sessions are the newest only: the totals are summed over the whole window.
    const sums = await db
      .selectFrom('meter_ticks as t')
      .innerJoin('sessions as s', 's.id', 't.session_id')
      .leftJoin('tokens as k', 'k.id', 's.token_id')
      .select((eb) => [
        eb.fn.sum<number | string | null>('t.seconds').as('seconds'),
        eb.fn.sum<number | string | null>('t.credits').as('credits'),
      ])
      .where('s.account_id', '=', accountId)
      .where('s.created_at', '>=', since)
      .$if(until !== undefined, (q) => q.where('s.created_at', '<', until!))
      .$if(keyId !== undefined, (q) => q.where('k.api_key_id', '=', keyId!))
      .executeTakeFirstOrThrow();
    total = { billed_seconds: Number(sums.seconds ?? 0), credits: Number(sums.credits ?? 0) };
  }
  // Per model: sessions counted from the sessions (those never billed too), seconds and credits from the ticks.
  const modelRows = await db
    .selectFrom('sessions as s')
    .innerJoin('models as m', 'm.id', 's.model_id')
    .leftJoin('tokens as k', 'k.id', 's.token_id')
    .leftJoin(
      (eb) =>
        eb
          .selectFrom('meter_ticks')
          .select([
            'session_id',
            (e) => e.fn.sum<number | string>('seconds').as('seconds'),
            (e) => e.fn.sum<number | string>('credits').as('credits'),
          ])
          .groupBy('session_id')
          .as('t'),
      (join) => join.onRef('t.session_id', '=', 's.id'),
    )
    .select((eb) => [
      'm.name',
      eb.fn.countAll<number | string>().as('sessions'),
      eb.fn.sum<number | string | null>('t.seconds').as('seconds'),
      eb.fn.sum<number | string | null>('t.credits').as('credits'),
    ])
    .where('s.account_id', '=', accountId)
    .where('s.created_at', '>=', since)
    .$if(until !== undefined, (q) => q.where('s.created_at', '<', until!))
    .$if(keyId !== undefined, (q) => q.where('k.api_key_id', '=', keyId!))
    .groupBy('m.name')
    .execute();
  const by_model = modelRows
    .map((r) => ({ model: r.name, sessions: Number(r.sessions), billed_seconds: Number(r.seconds ?? 0), credits: Number(r.credits ?? 0) }))
    .sort((a, b) => b.credits - a.credits || a.model.localeCompare(b.model));
  // Per day charged: integer division of the tick's time (both engines truncate a bigint quotient).
  const dayRows = await db
    .selectFrom('meter_ticks as t')
    .innerJoin('sessions as s', 's.id', 't.session_id')
    .leftJoin('tokens as k', 'k.id', 's.token_id')
    .select((eb) => [
      sql<number | string>`t.created_at / ${sql.lit(DAY_MS)}`.as('day'),
      eb.fn.sum<number | string | null>('t.seconds').as('seconds'),
      eb.fn.sum<number | string | null>('t.credits').as('credits'),
    ])
    .where('s.account_id', '=', accountId)
    .where('s.created_at', '>=', since)
    .$if(until !== undefined, (q) => q.where('s.created_at', '<', until!))
    .$if(keyId !== undefined, (q) => q.where('k.api_key_id', '=', keyId!))
    .groupBy(sql`t.created_at / ${sql.lit(DAY_MS)}`)
    .execute();
  const by_day = dayRows
    .map((r) => ({ day: Number(r.day), billed_seconds: Number(r.seconds ?? 0), credits: Number(r.credits ?? 0) }))
    .sort((a, b) => a.day - b.day)
    .map((r) => ({ day: new Date(r.day * DAY_MS).toISOString().slice(0, 10), billed_seconds: r.billed_seconds, credits: r.credits }));
  return { since, until: until ?? null, sessions, total, by_model, by_day, truncated };
}
