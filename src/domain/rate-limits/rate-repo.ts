/**
 * The SQL of rate_windows and rate_allowances (migrations/20261126100000_rate_limits.ts,
 * 20261128030000_rate_limits_gcra.ts); the grant and the give-back, which a gateway sends on its calls' path, are in
 * rate-sql.ts. A grant to a process is one statement that locks the access's window row, so no number of processes
 * takes a schedule past its limit (rate-allowances.ts).
 */
import type { Queryable } from '../../db/database.js';
import { namedQuery, type NamedQuery } from '../../db/named-query.js';
import { bindDeps } from '../bind.js';
import {
  GIVE_BACK_ALLOWANCE,
  giveBackValues,
  rateIdleStatements,
  TAKE_ALLOWANCE,
  takeValues,
  type GiveBack,
  type TakeAsk,
} from './rate-sql.js';

interface TakeAnswer {
  /** The schedules' ends (requests, tokens; at the limits asked) and the slots held, before this statement. */
  before: { requestsTat: number; tokensTat: number; concurrent: number };
  /** The schedules' ends after it (unchanged when nothing was granted). */
  after: { requestsTat: number; tokensTat: number; concurrent: number };
  /** What was granted; null when one dimension could not give its need (nothing was granted). */
  granted: { requests: number; tokens: number; concurrent: number } | null;
}

interface RateWindowRow {
  workspace_access_id: string;
  requests_tat: number;
  requests_limit: number | null;
  tokens_tat: number;
  tokens_limit: number | null;
  concurrent: number;
}

/** Dead processes' allowances (expired, or every one): their slots go back to their windows. */
const SWEEP = `
with gone as (
  delete from rate_allowances where cast(:all as boolean) or expires_at < cast(:now as timestamptz)
  returning workspace_access_id, concurrent
), s as (
  select workspace_access_id, sum(concurrent) as c from gone group by workspace_access_id
), freed as (
  update rate_windows rw set concurrent = greatest(0, rw.concurrent - s.c) from s where rw.workspace_access_id = s.workspace_access_id
)
select count(*) as n from gone`;

const num = (v: unknown): number => (v === null || v === undefined ? 0 : Number(v));

async function takeOnce(query: NamedQuery, a: TakeAsk): Promise<TakeAnswer | null> {
  const [row] = await query<Record<string, unknown>>('nexus_take_allowance', TAKE_ALLOWANCE, takeValues(a));
  if (!row) return null;
  const before = { requestsTat: num(row.rt), tokensTat: num(row.tt), concurrent: num(row.c) };
  if (row.gr === null) return { before, after: before, granted: null };
  return {
    before,
    after: { requestsTat: num(row.rt2), tokensTat: num(row.tt2), concurrent: before.concurrent + num(row.gc) },
    granted: { requests: num(row.gr), tokens: num(row.gt), concurrent: num(row.gc) },
  };
}

/**
 * One statement: grants a process what each dimension can give (at least its need, up to its want
 * while that is at most 1/share of what is left), all or nothing; the window row is made on first use.
 */
async function take(db: Queryable, query: NamedQuery, a: TakeAsk): Promise<TakeAnswer> {
  const first = await takeOnce(query, a);
  if (first) return first;
  await db.raw(
    `insert into rate_windows (workspace_access_id, workspace_id, requests_tat, tokens_tat, concurrent)
     values (?, ?, 0, 0, 0) on conflict (workspace_access_id) do nothing`,
    [a.accessId, a.workspaceId],
  );
  return (await takeOnce(query, a))!;
}

/** The heartbeat: allowances still there expire at `until`; returns their ids (the others were swept). */
async function renew(db: Queryable, ids: string[], until: Date, q: Queryable = db): Promise<Set<string>> {
  if (!ids.length) return new Set();
  const result = await q.raw(
    `update rate_allowances set expires_at = cast(:until as timestamptz)
      where id in (select cast(value as uuid) from json_array_elements_text(cast(:ids as json))) returning id`,
    { ids: JSON.stringify(ids), until: until.toISOString() },
  );
  return new Set((result.rows as { id: string }[]).map((r) => r.id));
}

/** Frees the slots of allowances past their expiry (`all`: every one, when no other process can hold any). */
async function sweep(db: Queryable, now: Date, all: boolean, q: Queryable = db): Promise<number> {
  const result = await q.raw(SWEEP, { now: now.toISOString(), all });
  return num((result.rows as { n: unknown }[])[0]?.n);
}

async function findWindow(db: Queryable, accessId: string, q: Queryable = db): Promise<RateWindowRow | undefined> {
  return q('rate_windows').where({ workspace_access_id: accessId }).first();
}

/**
 * The repository over `db`, each function with its `q` defaulting to it. `prepared`: a grant and a give-back go as
 * named statements (rate-sql.ts), as the gateway's repository sends them with NEXUS_DATABASE_PREPARED_STATEMENTS;
 * unnamed otherwise (behind a transaction pooler, and in the services' repository).
 */
export function createRateRepo(db: Queryable, prepared = false) {
  const query = namedQuery(db, prepared);
  return {
    ...bindDeps(db, { renew, sweep, findWindow }),
    take: (a: TakeAsk) => take(db, query, a),
    /** Gives back unused requests, tokens and slots (rate-allowances.ts, when idle or past their hold). */
    giveBack: async (g: GiveBack) => void (await query('nexus_give_back_allowance', GIVE_BACK_ALLOWANCE, giveBackValues(g))),
    /** The grant and the give-back on no access (they write nothing): what each new gateway connection settles on. */
    idleStatements: rateIdleStatements,
  };
}

export type RateRepo = ReturnType<typeof createRateRepo>;
