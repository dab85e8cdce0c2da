/**
 * All SQL of rate_windows and rate_allowances (migrations/20261126100000_rate_limits.ts,
 * 20261128030000_rate_limits_gcra.ts). A grant to a process is one statement that locks the
 * access's window row, so no number of processes takes a schedule past its limit
 * (rate-allowances.ts).
 */
import type { Queryable } from '../../db/database.js';
import { bindDeps } from '../bind.js';
import { WINDOW_MS } from './rate-types.js';

/** A concurrency figure with no limit: nothing is asked of it and nothing can exceed it. */
const NO_LIMIT = '9223372036854775807';

/** What one dimension asks: at least `need`, up to `want` while that is at most 1/share of what is left; `limit` null: none. */
export interface Ask {
  need: number;
  want: number;
  limit: number | null;
}

/** What a process asks of an access's rate window in one take. */
interface TakeAsk {
  id: string;
  workspaceId: string;
  accessId: string;
  /** The process's clock (ms since the epoch). */
  nowMs: number;
  /** How long the process may keep units beyond its need unused: they are scheduled no earlier than now + holdMs. */
  holdMs: number;
  requests: Ask;
  tokens: Ask;
  concurrent: Ask;
  share: number;
  expiresAt: Date;
}

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

/**
 * A row's schedules (rw) at the limits asked (v.lim_r, v.lim_t): a schedule made at another limit (the plan's
 * changed) keeps the units it has in use, rescheduled from now at the new pace.
 */
const RESCALED = `
  case when v.lim_r is null or rw.requests_limit is null or rw.requests_limit = v.lim_r or rw.requests_tat <= v.now
       then rw.requests_tat else v.now + (rw.requests_tat - v.now) * rw.requests_limit / v.lim_r end as rt,
  case when v.lim_t is null or rw.tokens_limit is null or rw.tokens_limit = v.lim_t or rw.tokens_tat <= v.now
       then rw.tokens_tat else v.now + (rw.tokens_tat - v.now) * rw.tokens_limit / v.lim_t end as tt`;

/*
 * GCRA per dimension: the need is scheduled from max(tat, now); the units beyond it (headroom, which the
 * process may use up to holdMs later) from max(that, now + holdMs), so a unit is never used before its place
 * in the schedule. All or nothing: a dimension that cannot schedule its need within a minute of now grants
 * nothing.
 */
const TAKE = `
with v as (
  select cast(:now as double precision) as now, cast(:win as double precision) as win, cast(:hold as double precision) as hold,
         cast(:needR as double precision) as need_r, cast(:wantR as double precision) as want_r, cast(:limR as double precision) as lim_r,
         cast(:needT as double precision) as need_t, cast(:wantT as double precision) as want_t, cast(:limT as double precision) as lim_t,
         cast(:share as double precision) as share
), locked as (
  select * from rate_windows where workspace_access_id = :accessId for update
), cur as (
  select ${RESCALED}, cast(concurrent as bigint) as c from locked rw, v
), p as (
  select cur.*, v.*,
         greatest(rt, now) + need_r * win / lim_r as rb,
         greatest(tt, now) + need_t * win / lim_t as tb,
         greatest(cast(:needC as bigint), least(cast(:wantC as bigint), (cast(:limC as bigint) - c) / :share)) as gc
    from cur, v
), g as (
  select p.*,
         greatest(0, least(want_r - need_r, floor((now + win - greatest(rb, now + hold)) * lim_r / win / share + 1e-9))) as xr,
         greatest(0, least(want_t - need_t, floor((now + win - greatest(tb, now + hold)) * lim_t / win / share + 1e-9))) as xt
    from p
), ok as (
  select g.*,
         case when lim_r is null then rt when xr > 0 then greatest(rb, now + hold) + xr * win / lim_r else rb end as rt2,
         case when lim_t is null then tt when xt > 0 then greatest(tb, now + hold) + xt * win / lim_t else tb end as tt2
    from g
   where (lim_r is null or (rb - now) * lim_r / win <= lim_r + 1e-6)
     and (lim_t is null or (tb - now) * lim_t / win <= lim_t + 1e-6)
     and c + gc <= cast(:limC as bigint)
), upd as (
  update rate_windows rw set requests_tat = ok.rt2, requests_limit = coalesce(cast(ok.lim_r as int), rw.requests_limit),
         tokens_tat = ok.tt2, tokens_limit = coalesce(cast(ok.lim_t as int), rw.tokens_limit), concurrent = ok.c + ok.gc
    from ok where rw.workspace_access_id = :accessId
), al as (
  insert into rate_allowances (id, workspace_id, workspace_access_id, concurrent, expires_at)
  select cast(:id as uuid), cast(:workspaceId as uuid), cast(:accessId as uuid), ok.gc, cast(:expiresAt as timestamptz) from ok where ok.gc > 0
  on conflict (id) do update set concurrent = rate_allowances.concurrent + excluded.concurrent, expires_at = excluded.expires_at
)
select g.rt, g.tt, g.c, ok.rt2, ok.tt2,
       case when ok.c is null then null when g.lim_r is null then 0 else g.need_r + ok.xr end as gr,
       case when g.lim_t is null then 0 else g.need_t + ok.xt end as gt, ok.gc
  from g left join ok on true`;

/**
 * Gives back what a process holds unused: requests and tokens (their schedules end earlier, never before
 * now), and slots, never more than its allowance row still holds (the sweeper may have freed them).
 */
const GIVE_BACK = `
with v as (
  select cast(:now as double precision) as now, cast(:win as double precision) as win,
         cast(:r as double precision) as r, cast(:limR as double precision) as lim_r,
         cast(:t as double precision) as t, cast(:limT as double precision) as lim_t
), al as (
  select concurrent from rate_allowances where id = :id for update
), back as (
  select least(cast(:c as int), coalesce((select concurrent from al), 0)) as c
), cur as (
  select rw.workspace_access_id, ${RESCALED} from rate_windows rw, v where rw.workspace_access_id = :accessId for update of rw
), win as (
  update rate_windows rw
     set requests_tat = case when v.lim_r is null or v.r = 0 then rw.requests_tat
                             else greatest(least(v.now, cur.rt), cur.rt - v.r * v.win / v.lim_r) end,
         requests_limit = case when v.lim_r is null or v.r = 0 then rw.requests_limit else cast(v.lim_r as int) end,
         tokens_tat = case when v.lim_t is null or v.t = 0 then rw.tokens_tat
                           else greatest(least(v.now, cur.tt), cur.tt - v.t * v.win / v.lim_t) end,
         tokens_limit = case when v.lim_t is null or v.t = 0 then rw.tokens_limit else cast(v.lim_t as int) end,
         concurrent = greatest(0, rw.concurrent - (select c from back))
    from v, cur
   where rw.workspace_access_id = cur.workspace_access_id
), kept as (
  update rate_allowances set concurrent = concurrent - (select c from back) where id = :id and concurrent > (select c from back)
), dropped as (
  delete from rate_allowances where id = :id and concurrent <= (select c from back)
)
select (select c from back) as c`;

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

async function takeOnce(a: TakeAsk, q: Queryable): Promise<TakeAnswer | null> {
  const result = await q.raw(TAKE, {
    id: a.id,
    workspaceId: a.workspaceId,
    accessId: a.accessId,
    now: a.nowMs,
    hold: a.holdMs,
    win: WINDOW_MS,
    needR: a.requests.need,
    wantR: a.requests.want,
    limR: a.requests.limit,
    needT: a.tokens.need,
    wantT: a.tokens.want,
    limT: a.tokens.limit,
    needC: a.concurrent.need,
    wantC: a.concurrent.want,
    limC: a.concurrent.limit ?? NO_LIMIT,
    share: a.share,
    expiresAt: a.expiresAt.toISOString(),
  });
  const row = (result.rows as Record<string, unknown>[])[0];
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
async function take(db: Queryable, a: TakeAsk, q: Queryable = db): Promise<TakeAnswer> {
  const first = await takeOnce(a, q);
  if (first) return first;
  await q.raw(
    `insert into rate_windows (workspace_access_id, workspace_id, requests_tat, tokens_tat, concurrent)
     values (?, ?, 0, 0, 0) on conflict (workspace_access_id) do nothing`,
    [a.accessId, a.workspaceId],
  );
  return (await takeOnce(a, q))!;
}

/** Gives back unused requests, tokens and slots (rate-allowances.ts, when idle or past their hold). */
async function giveBack(
  db: Queryable,
  g: {
    id: string;
    accessId: string;
    nowMs: number;
    requests: number;
    tokens: number;
    concurrent: number;
    limits: { requests: number | null; tokens: number | null };
  },
  q: Queryable = db,
): Promise<void> {
  await q.raw(GIVE_BACK, {
    id: g.id,
    accessId: g.accessId,
    now: g.nowMs,
    win: WINDOW_MS,
    r: g.requests,
    t: g.tokens,
    c: g.concurrent,
    limR: g.limits.requests,
    limT: g.limits.tokens,
  });
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

export const createRateRepo = (db: Queryable) => bindDeps(db, { take, giveBack, renew, sweep, findWindow });

export type RateRepo = ReturnType<typeof createRateRepo>;
