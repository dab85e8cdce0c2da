/**
 * The statements a gateway sends on its calls' path to rate_windows and rate_allowances (rate-repo.ts runs them): a
 * grant (`TAKE_ALLOWANCE`) and a give-back (`GIVE_BACK_ALLOWANCE`). Each has positional parameters ($1...), every
 * one of a single type, so the gateway's repository sends it as a named statement (src/db/named-query.ts), prepared
 * and planned once per connection of its pool, not at each run; elsewhere, and behind a transaction pooler, the same
 * text goes unnamed. `rateIdleStatements` is what each new connection of the gateway's pool runs to settle on their
 * plans (src/gateway/gateway-db.ts).
 */
import { NIL_ID, positional, type IdleStatement } from '../../db/named-query.js';
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
export interface TakeAsk {
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
  /** A whole number (integer division of the slots left). */
  share: number;
  expiresAt: Date;
}

/** What a process gives back of what it holds unused. */
export interface GiveBack {
  id: string;
  accessId: string;
  nowMs: number;
  requests: number;
  tokens: number;
  concurrent: number;
  limits: { requests: number | null; tokens: number | null };
}

const take = positional([
  'now',
  'win',
  'hold',
  'needR',
  'wantR',
  'limR',
  'needT',
  'wantT',
  'limT',
  'share',
  'accessId',
  'needC',
  'wantC',
  'limC',
  'id',
  'workspaceId',
  'expiresAt',
] as const);
const back = positional(['now', 'win', 'r', 'limR', 't', 'limT', 'id', 'c', 'accessId'] as const);

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
 * nothing. The slots' share divides as whole numbers.
 */
export const TAKE_ALLOWANCE = `
with v as (
  select cast(${take.at('now')} as double precision) as now, cast(${take.at('win')} as double precision) as win,
         cast(${take.at('hold')} as double precision) as hold,
         cast(${take.at('needR')} as double precision) as need_r, cast(${take.at('wantR')} as double precision) as want_r,
         cast(${take.at('limR')} as double precision) as lim_r,
         cast(${take.at('needT')} as double precision) as need_t, cast(${take.at('wantT')} as double precision) as want_t,
         cast(${take.at('limT')} as double precision) as lim_t,
         cast(${take.at('share')} as double precision) as share
), locked as (
  select * from rate_windows where workspace_access_id = cast(${take.at('accessId')} as uuid) for update
), cur as (
  select ${RESCALED}, cast(concurrent as bigint) as c from locked rw, v
), p as (
  select cur.*, v.*,
         greatest(rt, now) + need_r * win / lim_r as rb,
         greatest(tt, now) + need_t * win / lim_t as tb,
         greatest(cast(${take.at('needC')} as bigint),
                  least(cast(${take.at('wantC')} as bigint), (cast(${take.at('limC')} as bigint) - c) / cast(v.share as bigint))) as gc
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
     and c + gc <= cast(${take.at('limC')} as bigint)
), upd as (
  update rate_windows rw set requests_tat = ok.rt2, requests_limit = coalesce(cast(ok.lim_r as int), rw.requests_limit),
         tokens_tat = ok.tt2, tokens_limit = coalesce(cast(ok.lim_t as int), rw.tokens_limit), concurrent = ok.c + ok.gc
    from ok where rw.workspace_access_id = cast(${take.at('accessId')} as uuid)
), al as (
  insert into rate_allowances (id, workspace_id, workspace_access_id, concurrent, expires_at)
  select cast(${take.at('id')} as uuid), cast(${take.at('workspaceId')} as uuid), cast(${take.at('accessId')} as uuid), ok.gc,
         cast(${take.at('expiresAt')} as timestamptz)
    from ok where ok.gc > 0
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
export const GIVE_BACK_ALLOWANCE = `
with v as (
  select cast(${back.at('now')} as double precision) as now, cast(${back.at('win')} as double precision) as win,
         cast(${back.at('r')} as double precision) as r, cast(${back.at('limR')} as double precision) as lim_r,
         cast(${back.at('t')} as double precision) as t, cast(${back.at('limT')} as double precision) as lim_t
), al as (
  select concurrent from rate_allowances where id = cast(${back.at('id')} as uuid) for update
), back as (
  select least(cast(${back.at('c')} as int), coalesce((select concurrent from al), 0)) as c
), cur as (
  select rw.workspace_access_id, ${RESCALED} from rate_windows rw, v
   where rw.workspace_access_id = cast(${back.at('accessId')} as uuid) for update of rw
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
  update rate_allowances set concurrent = concurrent - (select c from back)
   where id = cast(${back.at('id')} as uuid) and concurrent > (select c from back)
), dropped as (
  delete from rate_allowances where id = cast(${back.at('id')} as uuid) and concurrent <= (select c from back)
)
select (select c from back) as c`;

export const takeValues = (a: TakeAsk): unknown[] =>
  take.values({
    now: a.nowMs,
    win: WINDOW_MS,
    hold: a.holdMs,
    needR: a.requests.need,
    wantR: a.requests.want,
    limR: a.requests.limit,
    needT: a.tokens.need,
    wantT: a.tokens.want,
    limT: a.tokens.limit,
    share: a.share,
    accessId: a.accessId,
    needC: a.concurrent.need,
    wantC: a.concurrent.want,
    limC: a.concurrent.limit ?? NO_LIMIT,
    id: a.id,
    workspaceId: a.workspaceId,
    expiresAt: a.expiresAt.toISOString(),
  });

export const giveBackValues = (g: GiveBack): unknown[] =>
  back.values({
    now: g.nowMs,
    win: WINDOW_MS,
    r: g.requests,
    limR: g.limits.requests,
    t: g.tokens,
    limT: g.limits.tokens,
    id: g.id,
    c: g.concurrent,
    accessId: g.accessId,
  });

/**
 * The two statements on the nil access and allowance: no window and no allowance row matches, so nothing is written.
 * What each new connection of the gateway's pool runs until it has settled on their plans.
 */
export function rateIdleStatements(now: Date): IdleStatement[] {
  const none = { need: 0, want: 0, limit: null };
  const nowMs = now.getTime();
  const ids = { id: NIL_ID, accessId: NIL_ID, nowMs };
  const ask = { ...ids, workspaceId: NIL_ID, holdMs: 0, requests: none, tokens: none, concurrent: none, share: 1, expiresAt: now };
  const given = { ...ids, requests: 0, tokens: 0, concurrent: 0, limits: { requests: null, tokens: null } };
  return [
    { name: 'nexus_take_allowance', text: TAKE_ALLOWANCE, values: takeValues(ask) },
    { name: 'nexus_give_back_allowance', text: GIVE_BACK_ALLOWANCE, values: giveBackValues(given) },
  ];
}
