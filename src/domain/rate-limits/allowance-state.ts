/**
 * What a process keeps of its rate allowances (rate-allowances.ts), per access, and how it changes: it grows (one
 * statement asks the window for what is missing plus headroom), what is held past its hold goes back unless it is a
 * sliver of each limit, an idle access gives back what it holds, and the heartbeat renews the slots held.
 */
import { newId } from '../../ids.js';
import type { Logger } from '../../observability/logger.js';
import type { Clock } from '../actor.js';
import type { RateRepo } from './rate-repo.js';
import type { Ask } from './rate-sql.js';
import { inUse, remainingOf, resetAtOf, WINDOW_MS, type RateLimits, type RateView } from './rate-types.js';

const RATE_CALLS = 16;
const MAX_RATE_CALLS = 1024;
const SHARE = 8;
/**
 * Past its hold a busy access keeps what it holds unused when that is at most 1/KEEP_SHARE of each limit: a sliver no
 * other process's refusal could have used much of. Using a unit later than its place in the schedule never exceeds a
 * limit, so this costs exactness nothing; it only keeps that sliver from other processes until it is used or the
 * access goes idle.
 */
const KEEP_SHARE = 100;
/** How long a refusal's figures are trusted, so a client hammering at a limit costs few statements. */
const REFUSAL_MEMORY_MS = 100;

export interface RateTarget {
  workspaceId: string;
  accessId: string;
}

/** What the window row said at the last statement: the schedules' ends (at `limits`) and the slots held, ours included. */
export interface RowFigures {
  requestsTat: number;
  tokensTat: number;
  concurrent: number;
  limits: RateLimits;
}

export interface AccessState {
  target: RateTarget;
  /** Its rate_allowances row (slots), made at the first grant of a slot. */
  id: string;
  limits: RateLimits;
  freeRequests: number;
  freeTokens: number;
  /** When what the process holds of requests and tokens unused goes back (its headroom's hold ends). */
  freeUntilMs: number;
  /** The plan's limits changed: what the process holds goes back at its hold's end whatever its size. */
  limitsChanged: boolean;
  row: RowFigures;
  heldSlots: number;
  slotsInUse: number;
  /** Calls admitted and not settled. */
  inflight: number;
  headroomCalls: number;
  lastUsedMs: number;
  growing: Promise<unknown> | undefined;
  /** The statement giving back what was held past its hold: the next grant waits for it, so it reads the schedule without it. */
  returning: Promise<void> | undefined;
  refusedUntilMs: number;
  /** The figures of the last refusal (what the window row said). */
  refusedRow: RowFigures | undefined;
  released: boolean;
}

/** What each dimension lacks for a call: requests, tokens, concurrency slots. */
export interface Need {
  r: number;
  t: number;
  c: number;
}

export interface AllowanceDeps {
  repo: RateRepo;
  clock: Clock;
  logger: Logger;
  ttlMs: number;
  idleMs: number;
}

/** A process's rate allowances: their dependencies and what it holds per access, for its lifetime. */
export interface Allowances extends AllowanceDeps {
  states: Map<string, AccessState>;
  releases: Set<Promise<void>>;
  timers: NodeJS.Timeout[];
}

function newState(allowances: Allowances, target: RateTarget, limits: RateLimits): AccessState {
  return {
    target,
    id: newId(),
    limits,
    freeRequests: 0,
    freeTokens: 0,
    freeUntilMs: 0,
    limitsChanged: false,
    row: { requestsTat: 0, tokensTat: 0, concurrent: 0, limits },
    heldSlots: 0,
    slotsInUse: 0,
    inflight: 0,
    headroomCalls: RATE_CALLS,
    lastUsedMs: allowances.clock.now().getTime(),
    growing: undefined,
    returning: undefined,
    refusedUntilMs: 0,
    refusedRow: undefined,
    released: false,
  };
}

/** The access's state, made at its first call here, at the plan's limits now. */
export function stateOf(allowances: Allowances, target: RateTarget, limits: RateLimits): AccessState {
  let st = allowances.states.get(target.accessId);
  if (!st) {
    st = newState(allowances, target, limits);
    allowances.states.set(target.accessId, st);
  }
  const l = st.limits;
  if (l.requestsPerMinute !== limits.requestsPerMinute || l.tokensPerMinute !== limits.tokensPerMinute) {
    // The plan's limits changed: what the process holds goes back at once (the row keeps the units in use).
    st.freeUntilMs = 0;
    st.limitsChanged = true;
  }
  st.limits = limits;
  return st;
}

/** Units in use of each windowed dimension per the row's figures, at `nowMs` (a row made at other limits keeps its units). */
export function used(row: RowFigures, nowMs: number): { r: number; t: number } {
  return {
    r: row.limits.requestsPerMinute === null ? 0 : inUse(row.requestsTat, row.limits.requestsPerMinute, nowMs),
    t: row.limits.tokensPerMinute === null ? 0 : inUse(row.tokensTat, row.limits.tokensPerMinute, nowMs),
  };
}

/** Where one windowed limit stands for this process: in use by the row's figures, less what it holds unused. */
const windowView = (limit: number, inUseNow: number, freeHere: number, nowMs: number) => {
  const taken = Math.max(0, inUseNow - Math.max(0, freeHere));
  return { limit, remaining: remainingOf(limit, taken), resetAtMs: resetAtOf(taken, limit, nowMs) };
};

export function viewOf(st: AccessState, nowMs: number): RateView {
  const view: RateView = {};
  const l = st.limits;
  const u = used(st.row, nowMs);
  if (l.requestsPerMinute !== null) view.requests = windowView(l.requestsPerMinute, u.r, st.freeRequests, nowMs);
  if (l.tokensPerMinute !== null) view.tokens = windowView(l.tokensPerMinute, u.t, st.freeTokens, nowMs);
  if (l.concurrentCalls !== null) {
    view.concurrent = {
      limit: l.concurrentCalls,
      remaining: Math.max(0, l.concurrentCalls - st.row.concurrent + (st.heldSlots - st.slotsInUse)),
    };
  }
  return view;
}

/** What a call of `tokens` lacks (`tokensOnly`: a Realtime turn, which asks for no request and no slot of its own). */
export function needs(st: AccessState, tokens: number, tokensOnly = false): Need {
  const l = st.limits;
  return {
    r: l.requestsPerMinute !== null && !tokensOnly ? Math.max(0, 1 - st.freeRequests) : 0,
    t: l.tokensPerMinute !== null ? Math.max(0, tokens - st.freeTokens) : 0,
    c: l.concurrentCalls !== null && !tokensOnly ? Math.max(0, 1 - (st.heldSlots - st.slotsInUse)) : 0,
  };
}

/** The take's ask of each dimension: the need, and headroom of `h` calls (slots asked one at a time beyond it). */
function asks(l: RateLimits, need: Need, tokens: number, h: number): { requests: Ask; tokens: Ask; concurrent: Ask } {
  const ask = (n: number, per: number, limit: number | null): Ask =>
    limit === null ? { need: 0, want: 0, limit: null } : { need: n, want: n + per * h, limit };
  return {
    requests: ask(need.r, 1, l.requestsPerMinute),
    tokens: ask(need.t, Math.max(tokens, 1), l.tokensPerMinute),
    // Slots are asked one at a time beyond the need: a slot held unused is one another process lacks.
    concurrent:
      l.concurrentCalls === null
        ? { need: 0, want: 0, limit: null }
        : { need: need.c, want: need.c + Math.min(h, 4), limit: l.concurrentCalls },
  };
}

/**
 * One statement: what the access lacks plus headroom, from its window row. Refused: the row's figures are kept
 * for REFUSAL_MEMORY_MS; granted: held until the hold ends (headroom is scheduled after it).
 */
export async function grow(allowances: Allowances, st: AccessState, need: Need, tokens: number): Promise<void> {
  const { repo, clock, idleMs, ttlMs } = allowances;
  const l = st.limits;
  const h = Math.max(st.headroomCalls, slivers(l, tokens));
  if (st.returning) await st.returning;
  st.returning = undefined;
  const nowMs = clock.now().getTime();
  const { id, target } = st;
  const answer = await repo.take({
    id,
    workspaceId: target.workspaceId,
    accessId: target.accessId,
    nowMs,
    holdMs: idleMs,
    ...asks(l, need, tokens, h),
    share: SHARE,
    expiresAt: new Date(nowMs + ttlMs),
  });
  st.row = { ...answer.after, limits: l };
  const g = answer.granted;
  if (!g) {
    st.refusedRow = { ...answer.before, limits: l };
    st.refusedUntilMs = clock.now().getTime() + REFUSAL_MEMORY_MS;
    return;
  }
  // What the process holds must be used within the hold (headroom is scheduled after it); what is left then goes back.
  st.freeUntilMs = nowMs + idleMs;
  st.freeRequests += g.requests;
  st.freeTokens += g.tokens;
  st.heldSlots += g.concurrent;
  st.refusedRow = undefined;
  if (st.headroomCalls < MAX_RATE_CALLS) st.headroomCalls *= 2;
}

export function giveBack(allowances: Allowances, st: AccessState, held: { requests: number; tokens: number; slots: number }, what: string) {
  const done = allowances.repo
    .giveBack({
      id: st.id,
      accessId: st.target.accessId,
      nowMs: allowances.clock.now().getTime(),
      requests: held.requests,
      tokens: held.tokens,
      concurrent: held.slots,
      limits: { requests: st.limits.requestsPerMinute, tokens: st.limits.tokensPerMinute },
    })
    .catch((err: Error) => {
      allowances.logger.error({ msg: `could not give back ${what}`, accessId: st.target.accessId, error: err.message });
    })
    .finally(() => allowances.releases.delete(done));
  allowances.releases.add(done);
  return done;
}

/** Units held unused that a busy access keeps past its hold (KEEP_SHARE). */
const sliver = (held: number, limit: number | null): boolean => limit === null || held * KEEP_SHARE <= limit;

/**
 * The calls of `tokens` whose requests and tokens are a sliver of each limit (at most MAX_RATE_CALLS): headroom the
 * access could keep past its hold anyway, so asking for it at once costs other processes nothing, where doubling
 * from RATE_CALLS took a busy access four or five statements to reach its pace after each idle second.
 */
function slivers(l: RateLimits, tokens: number): number {
  const byRequests = l.requestsPerMinute === null ? MAX_RATE_CALLS : l.requestsPerMinute / KEEP_SHARE;
  const byTokens = l.tokensPerMinute === null ? MAX_RATE_CALLS : l.tokensPerMinute / KEEP_SHARE / Math.max(tokens, 1);
  return Math.floor(Math.min(MAX_RATE_CALLS, byRequests, byTokens));
}

/** The requests and tokens the process holds past their hold go back to the schedule, unless they are a sliver of each limit. */
export function expire(allowances: Allowances, st: AccessState, nowMs: number): void {
  if (nowMs < st.freeUntilMs || st.growing || st.released) return;
  const requests = Math.max(0, st.freeRequests);
  const tokens = Math.max(0, st.freeTokens);
  if (requests === 0 && tokens === 0) return;
  const l = st.row.limits;
  if (!st.limitsChanged && sliver(requests, st.limits.requestsPerMinute) && sliver(tokens, st.limits.tokensPerMinute)) {
    st.freeUntilMs = nowMs + allowances.idleMs;
    return;
  }
  st.limitsChanged = false;
  st.freeRequests -= requests;
  st.freeTokens -= tokens;
  if (l.requestsPerMinute !== null) st.row.requestsTat -= (requests * WINDOW_MS) / l.requestsPerMinute;
  if (l.tokensPerMinute !== null) st.row.tokensTat -= (tokens * WINDOW_MS) / l.tokensPerMinute;
  st.returning = giveBack(allowances, st, { requests, tokens, slots: 0 }, 'a rate allowance past its hold');
}

/** Gives back what the process holds unused for the access, and forgets it (the next call starts afresh). */
export function release(allowances: Allowances, st: AccessState): void {
  if (st.released || st.growing) return;
  st.released = true;
  const requests = st.freeRequests > 0 ? st.freeRequests : 0;
  const tokens = st.freeTokens > 0 ? st.freeTokens : 0;
  const slots = st.heldSlots - st.slotsInUse;
  allowances.states.delete(st.target.accessId);
  if (requests === 0 && tokens === 0 && slots <= 0) return;
  void giveBack(allowances, st, { requests, tokens, slots: Math.max(0, slots) }, 'a rate allowance; its slots return after the TTL');
}

/** The idle timer's pass: an access idle for `idleMs` gives back what is held; a busy one, what is past its hold. */
export function releaseIdle(allowances: Allowances): void {
  const nowMs = allowances.clock.now().getTime();
  for (const st of [...allowances.states.values()]) {
    if (st.inflight === 0 && nowMs - st.lastUsedMs >= allowances.idleMs) release(allowances, st);
    else expire(allowances, st, nowMs);
  }
}

/** The heartbeat's pass: the slots this process holds are renewed; those swept (it was taken for dead) are dropped. */
export function renewSlots(allowances: Allowances): void {
  const { states, repo, clock, ttlMs, logger } = allowances;
  const ids: string[] = [];
  for (const st of states.values()) if (st.heldSlots > 0) ids.push(st.id);
  if (!ids.length) return;
  repo.renew(ids, new Date(clock.now().getTime() + ttlMs)).then(
    (held) => {
      // Swept (this process was taken for dead): its slots were freed; the calls using them run on unbacked.
      for (const st of states.values()) {
        if (st.heldSlots > 0 && !held.has(st.id) && ids.includes(st.id)) {
          st.heldSlots = 0;
          st.slotsInUse = 0;
        }
      }
    },
    (err: Error) => logger.warn({ msg: 'rate allowance heartbeat failed', error: err.message }),
  );
}
