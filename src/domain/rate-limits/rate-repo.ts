/**
 * All SQL of rate_windows and rate_allowances (migrations/20261126100000_rate_limits.ts).
 * A grant to a process is one statement that locks the access's window row, so no
 * number of processes takes a figure past its limit (rate-allowances.ts).
 */
import type { Queryable } from '../../db/database.js';

/** A figure with no limit: nothing is asked of it and nothing can exceed it. */
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
  windowStart: Date;
  requests: Ask;
  tokens: Ask;
  concurrent: Ask;
  share: number;
  expiresAt: Date;
}

export interface TakeAnswer {
  /** What the access had used in the window (requests, tokens) and held (slots) before this statement. */
  used: { requests: number; tokens: number; concurrent: number };
  /** What was granted; null when one dimension could not give its need (nothing was granted). */
  granted: { requests: number; tokens: number; concurrent: number } | null;
}

export interface RateWindowRow {
  workspace_access_id: string;
  window_start: Date;
  requests: bigint;
  tokens: bigint;
  concurrent: number;
}

const TAKE = `
with cur as (
  select case when window_start = cast(:w as timestamptz) then requests else 0 end as r,
         case when window_start = cast(:w as timestamptz) then tokens else 0 end as t,
         cast(concurrent as bigint) as c
    from rate_windows where workspace_access_id = :accessId for update
), g as (
  select r, t, c,
         greatest(cast(:needR as bigint), least(cast(:wantR as bigint), (cast(:limR as bigint) - r) / :share)) as gr,
         greatest(cast(:needT as bigint), least(cast(:wantT as bigint), (cast(:limT as bigint) - t) / :share)) as gt,
         greatest(cast(:needC as bigint), least(cast(:wantC as bigint), (cast(:limC as bigint) - c) / :share)) as gc
    from cur
), ok as (
  select * from g where r + gr <= cast(:limR as bigint) and t + gt <= cast(:limT as bigint) and c + gc <= cast(:limC as bigint)
), upd as (
  update rate_windows rw set window_start = cast(:w as timestamptz), requests = ok.r + ok.gr, tokens = ok.t + ok.gt,
         concurrent = ok.c + ok.gc
    from ok where rw.workspace_access_id = :accessId
), al as (
  insert into rate_allowances (id, workspace_id, workspace_access_id, concurrent, expires_at)
  select cast(:id as uuid), cast(:workspaceId as uuid), cast(:accessId as uuid), ok.gc, cast(:expiresAt as timestamptz) from ok where ok.gc > 0
  on conflict (id) do update set concurrent = rate_allowances.concurrent + excluded.concurrent, expires_at = excluded.expires_at
)
select g.r, g.t, g.c, ok.gr, ok.gt, ok.gc from g left join ok on true`;

/**
 * Gives back what a process holds unused: requests and tokens of window :w (nothing once the window
 * moved on), and slots, never more than its allowance row still holds (the sweeper may have freed them).
 */
const GIVE_BACK = `
with al as (
  select concurrent from rate_allowances where id = :id for update
), back as (
  select least(cast(:c as int), coalesce((select concurrent from al), 0)) as c
), win as (
  update rate_windows rw
     set requests = case when rw.window_start = cast(:w as timestamptz) then greatest(0, rw.requests - cast(:r as bigint)) else rw.requests end,
         tokens = case when rw.window_start = cast(:w as timestamptz) then greatest(0, rw.tokens - cast(:t as bigint)) else rw.tokens end,
         concurrent = greatest(0, rw.concurrent - (select c from back))
   where rw.workspace_access_id = :accessId
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

export function createRateRepo(db: Queryable) {
  async function takeOnce(a: TakeAsk, q: Queryable): Promise<TakeAnswer | null> {
    const result = await q.raw(TAKE, {
      id: a.id,
      workspaceId: a.workspaceId,
      accessId: a.accessId,
      w: a.windowStart.toISOString(),
      needR: a.requests.need,
      wantR: a.requests.want,
      limR: a.requests.limit ?? NO_LIMIT,
      needT: a.tokens.need,
      wantT: a.tokens.want,
      limT: a.tokens.limit ?? NO_LIMIT,
      needC: a.concurrent.need,
      wantC: a.concurrent.want,
      limC: a.concurrent.limit ?? NO_LIMIT,
      share: a.share,
      expiresAt: a.expiresAt.toISOString(),
    });
    const row = (result.rows as Record<string, unknown>[])[0];
    if (!row) return null;
    return {
      used: { requests: num(row.r), tokens: num(row.t), concurrent: num(row.c) },
      granted: row.gr === null ? null : { requests: num(row.gr), tokens: num(row.gt), concurrent: num(row.gc) },
    };
  }

  return {
    /**
     * One statement: grants a process what each dimension can give (at least its need, up to its want
     * while that is at most 1/share of what is left), all or nothing; the window row is made on first use.
     */
    async take(a: TakeAsk, q: Queryable = db): Promise<TakeAnswer> {
      const first = await takeOnce(a, q);
      if (first) return first;
      await q.raw(
        `insert into rate_windows (workspace_access_id, workspace_id, window_start, requests, tokens, concurrent)
         values (?, ?, ?, 0, 0, 0) on conflict (workspace_access_id) do nothing`,
        [a.accessId, a.workspaceId, a.windowStart.toISOString()],
      );
      return (await takeOnce(a, q))!;
    },

    /** Gives back unused requests and tokens of a window and slots (rate-allowances.ts, when idle). */
    async giveBack(
      g: { id: string; accessId: string; windowStart: Date; requests: number; tokens: number; concurrent: number },
      q: Queryable = db,
    ) {
      await q.raw(GIVE_BACK, {
        id: g.id,
        accessId: g.accessId,
        w: g.windowStart.toISOString(),
        r: g.requests,
        t: g.tokens,
        c: g.concurrent,
      });
    },

    /** The heartbeat: allowances still there expire at `until`; returns their ids (the others were swept). */
    async renew(ids: string[], until: Date, q: Queryable = db): Promise<Set<string>> {
      if (!ids.length) return new Set();
      const result = await q.raw(
        `update rate_allowances set expires_at = cast(:until as timestamptz)
          where id in (select cast(value as uuid) from json_array_elements_text(cast(:ids as json))) returning id`,
        { ids: JSON.stringify(ids), until: until.toISOString() },
      );
      return new Set((result.rows as { id: string }[]).map((r) => r.id));
    },

    /** Frees the slots of allowances past their expiry (`all`: every one, when no other process can hold any). */
    async sweep(now: Date, all: boolean, q: Queryable = db): Promise<number> {
      const result = await q.raw(SWEEP, { now: now.toISOString(), all });
      return num((result.rows as { n: unknown }[])[0]?.n);
    },

    async findWindow(accessId: string, q: Queryable = db): Promise<RateWindowRow | undefined> {
      return q('rate_windows').where({ workspace_access_id: accessId }).first();
    },
  };
}

export type RateRepo = ReturnType<typeof createRateRepo>;
