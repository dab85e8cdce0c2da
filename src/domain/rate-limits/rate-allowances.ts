/**
 * Rate allowances: how a gateway process admits a call against its plan's rate
 * limits without a database round trip on most calls, and without any number of
 * processes admitting more than a limit (docs/rate-limits.md).
 *
 * The quota leases' pattern (quota-leases.ts), per access:
 * - The access's window row (rate_windows) holds, for requests and for tokens, the
 *   end of a GCRA schedule (rate-types.ts), and the concurrency slots processes hold.
 *   A grant is one statement that never takes a schedule past a minute from now or
 *   the slots past their limit (rate-repo.ts, TAKE), so admission is exact across
 *   processes: what a process admits it was granted.
 * - A process admits in memory against what it holds; when it lacks something it
 *   asks for what is missing plus headroom (RATE_CALLS call's worth, doubling up to
 *   MAX_RATE_CALLS, and from the first grant at least the calls that are a sliver of
 *   each limit; never more than 1/SHARE of what is left), one statement; calls
 *   arriving meanwhile wait for it. The headroom is scheduled after `idleMs` from
 *   now, and what is left of it then is given back: no unit is used before its place
 *   in the schedule.
 * - Tokens: a call is admitted for its bound (the quota's input and output bounds)
 *   and settled to its actual tokens after, the difference returning to what the
 *   process holds, and so to the next call's `x-ratelimit-remaining-tokens`.
 * - A slot is held for the call's duration, returned to the process on settle.
 * - Past its hold, a busy access keeps what it holds unused while that is at most
 *   1/KEEP_SHARE of each limit (giving it back and taking it again a moment later
 *   would be two statements a second per busy access); more goes back.
 * - An access idle on the process for `idleMs` gives back what the process holds
 *   unused (slots, requests and tokens): another process may be refused for at most
 *   that long while this one holds unused allowance. A slot freed while the access is
 *   at its concurrency limit goes back at once.
 * - The slots a process holds are in its rate_allowances row, renewed by its
 *   heartbeat; the sweeper frees a dead process's slots after the TTL. What a dead
 *   process was granted of requests and tokens stays scheduled (it may have used it)
 *   and drains at the limit's pace.
 */
import { newId } from '../../ids.js';
import type { Logger } from '../../observability/logger.js';
import type { Clock } from '../actor.js';
import type { Ask, RateRepo } from './rate-repo.js';
import { inUse, remainingOf, resetAtOf, secondsUntilFit, WINDOW_MS, type RateLimits, type RateView } from './rate-types.js';

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
const EPSILON = 1e-6;

export interface RateTarget {
  workspaceId: string;
  accessId: string;
}

/** What the window row said at the last statement: the schedules' ends (at `limits`) and the slots held, ours included. */
interface RowFigures {
  requestsTat: number;
  tokensTat: number;
  concurrent: number;
  limits: RateLimits;
}

interface AccessState {
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

export interface RateTicket {
  readonly state: AccessState;
  readonly tokens: number;
  readonly slot: boolean;
  settled: boolean;
}

type Reason = 'requests' | 'tokens' | 'concurrent';

export type RateAdmission =
  { ok: true; ticket: RateTicket; view: RateView } | { ok: false; view: RateView; retryAfterS: number; reason: Reason; never: boolean };

export function createRateAllowances(deps: { repo: RateRepo; clock: Clock; logger: Logger; ttlMs: number; idleMs: number }) {
  const { repo, clock, logger, ttlMs, idleMs } = deps;
  const states = new Map<string, AccessState>();
  const releases = new Set<Promise<void>>();

  function stateOf(target: RateTarget, limits: RateLimits): AccessState {
    let st = states.get(target.accessId);
    if (!st) {
      st = {
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
        lastUsedMs: clock.now().getTime(),
        growing: undefined,
        returning: undefined,
        refusedUntilMs: 0,
        refusedRow: undefined,
        released: false,
      };
      states.set(target.accessId, st);
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
  function used(row: RowFigures, nowMs: number): { r: number; t: number } {
    return {
      r: row.limits.requestsPerMinute === null ? 0 : inUse(row.requestsTat, row.limits.requestsPerMinute, nowMs),
      t: row.limits.tokensPerMinute === null ? 0 : inUse(row.tokensTat, row.limits.tokensPerMinute, nowMs),
    };
  }

  function viewOf(st: AccessState, nowMs: number): RateView {
    const view: RateView = {};
    const l = st.limits;
    const u = used(st.row, nowMs);
    if (l.requestsPerMinute !== null) {
      const r = Math.max(0, u.r - Math.max(0, st.freeRequests));
      view.requests = {
        limit: l.requestsPerMinute,
        remaining: remainingOf(l.requestsPerMinute, r),
        resetAtMs: resetAtOf(r, l.requestsPerMinute, nowMs),
      };
    }
    if (l.tokensPerMinute !== null) {
      const t = Math.max(0, u.t - Math.max(0, st.freeTokens));
      view.tokens = {
        limit: l.tokensPerMinute,
        remaining: remainingOf(l.tokensPerMinute, t),
        resetAtMs: resetAtOf(t, l.tokensPerMinute, nowMs),
      };
    }
    if (l.concurrentCalls !== null) {
      view.concurrent = {
        limit: l.concurrentCalls,
        remaining: Math.max(0, l.concurrentCalls - st.row.concurrent + (st.heldSlots - st.slotsInUse)),
      };
    }
    return view;
  }

  function needs(st: AccessState, tokens: number): { r: number; t: number; c: number } {
    const l = st.limits;
    return {
      r: l.requestsPerMinute !== null ? Math.max(0, 1 - st.freeRequests) : 0,
      t: l.tokensPerMinute !== null ? Math.max(0, tokens - st.freeTokens) : 0,
      c: l.concurrentCalls !== null ? Math.max(0, 1 - (st.heldSlots - st.slotsInUse)) : 0,
    };
  }

  /** Which limit refuses `need` at `nowMs` given what the window row said, if any. */
  function refusing(st: AccessState, need: { r: number; t: number; c: number }, row: RowFigures, nowMs: number): Reason | undefined {
    const l = st.limits;
    const u = used(row, nowMs);
    if (need.r > 0 && u.r + need.r > l.requestsPerMinute! + EPSILON) return 'requests';
    if (need.t > 0 && u.t + need.t > l.tokensPerMinute! + EPSILON) return 'tokens';
    if (need.c > 0 && row.concurrent + need.c > l.concurrentCalls!) return 'concurrent';
    return undefined;
  }

  function refusal(st: AccessState, reason: Reason, need: { r: number; t: number }, nowMs: number, never = false): RateAdmission {
    // Requests and tokens fit again when enough of the schedule has drained; a slot frees when a call ends,
    // or when another process gives back what it holds unused (within idleMs).
    const u = used(st.refusedRow ?? st.row, nowMs);
    const l = st.limits;
    const retryAfterS =
      reason === 'requests'
        ? secondsUntilFit(u.r, l.requestsPerMinute!, need.r)
        : reason === 'tokens'
          ? secondsUntilFit(u.t, l.tokensPerMinute!, need.t)
          : Math.max(1, Math.ceil(idleMs / 1000));
    return { ok: false, view: viewOf(st, nowMs), retryAfterS, reason, never };
  }

  async function grow(st: AccessState, need: { r: number; t: number; c: number }, tokens: number): Promise<void> {
    const l = st.limits;
    const h = Math.max(st.headroomCalls, slivers(l, tokens));
    const ask = (n: number, per: number, limit: number | null): Ask =>
      limit === null ? { need: 0, want: 0, limit: null } : { need: n, want: n + per * h, limit };
    if (st.returning) await st.returning;
    st.returning = undefined;
    const nowMs = clock.now().getTime();
    const answer = await repo.take({
      id: st.id,
      workspaceId: st.target.workspaceId,
      accessId: st.target.accessId,
      nowMs,
      holdMs: idleMs,
      requests: ask(need.r, 1, l.requestsPerMinute),
      tokens: ask(need.t, Math.max(tokens, 1), l.tokensPerMinute),
      // Slots are asked one at a time beyond the need: a slot held unused is one another process lacks.
      concurrent:
        l.concurrentCalls === null
          ? { need: 0, want: 0, limit: null }
          : { need: need.c, want: need.c + Math.min(h, 4), limit: l.concurrentCalls },
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

  function giveBack(st: AccessState, requests: number, tokens: number, slots: number, what: string): Promise<void> {
    const done = repo
      .giveBack({
        id: st.id,
        accessId: st.target.accessId,
        nowMs: clock.now().getTime(),
        requests,
        tokens,
        concurrent: slots,
        limits: { requests: st.limits.requestsPerMinute, tokens: st.limits.tokensPerMinute },
      })
      .catch((err: Error) => {
        logger.error({ msg: `could not give back ${what}`, accessId: st.target.accessId, error: err.message });
      })
      .finally(() => releases.delete(done));
    releases.add(done);
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
  function expire(st: AccessState, nowMs: number): void {
    if (nowMs < st.freeUntilMs || st.growing || st.released) return;
    const requests = Math.max(0, st.freeRequests);
    const tokens = Math.max(0, st.freeTokens);
    if (requests === 0 && tokens === 0) return;
    const l = st.row.limits;
    if (!st.limitsChanged && sliver(requests, st.limits.requestsPerMinute) && sliver(tokens, st.limits.tokensPerMinute)) {
      st.freeUntilMs = nowMs + idleMs;
      return;
    }
    st.limitsChanged = false;
    st.freeRequests -= requests;
    st.freeTokens -= tokens;
    if (l.requestsPerMinute !== null) st.row.requestsTat -= (requests * WINDOW_MS) / l.requestsPerMinute;
    if (l.tokensPerMinute !== null) st.row.tokensTat -= (tokens * WINDOW_MS) / l.tokensPerMinute;
    st.returning = giveBack(st, requests, tokens, 0, 'a rate allowance past its hold');
  }

  /** Gives back what the process holds unused for the access, and forgets it (the next call starts afresh). */
  function release(st: AccessState): void {
    if (st.released || st.growing) return;
    st.released = true;
    const requests = st.freeRequests > 0 ? st.freeRequests : 0;
    const tokens = st.freeTokens > 0 ? st.freeTokens : 0;
    const slots = st.heldSlots - st.slotsInUse;
    states.delete(st.target.accessId);
    if (requests === 0 && tokens === 0 && slots <= 0) return;
    void giveBack(st, requests, tokens, Math.max(0, slots), 'a rate allowance; its slots return after the TTL');
  }

  const idleTimer = setInterval(
    () => {
      const nowMs = clock.now().getTime();
      for (const st of [...states.values()]) {
        if (st.inflight === 0 && nowMs - st.lastUsedMs >= idleMs) release(st);
        else expire(st, nowMs);
      }
    },
    Math.max(10, Math.floor(idleMs / 2)),
  );
  idleTimer.unref();

  const heartbeatTimer = setInterval(
    () => {
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
    },
    Math.max(20, Math.floor(ttlMs / 5)),
  );
  heartbeatTimer.unref();

  return {
    /** Admits a call of at most `tokens` tokens on the access's limits, or says which limit refuses it and for how long. */
    async admit(target: RateTarget, limits: RateLimits, tokens: number): Promise<RateAdmission> {
      // Right after its own grant a call uses it, however long the statement took.
      let grown = false;
      for (;;) {
        const st = stateOf(target, limits);
        const nowMs = clock.now().getTime();
        if (limits.tokensPerMinute !== null && tokens > limits.tokensPerMinute) {
          return refusal(st, 'tokens', { r: 0, t: tokens }, nowMs, true);
        }
        if (!grown) expire(st, nowMs);
        const need = needs(st, tokens);
        if (need.r === 0 && need.t === 0 && need.c === 0) {
          st.freeRequests -= limits.requestsPerMinute !== null ? 1 : 0;
          st.freeTokens -= limits.tokensPerMinute !== null ? tokens : 0;
          const slot = limits.concurrentCalls !== null;
          if (slot) st.slotsInUse++;
          st.inflight++;
          st.lastUsedMs = nowMs;
          return { ok: true, ticket: { state: st, tokens, slot, settled: false }, view: viewOf(st, nowMs) };
        }
        if (st.growing) {
          await st.growing.catch(() => {});
          continue;
        }
        if (st.refusedRow && st.refusedUntilMs > nowMs) {
          const reason = refusing(st, need, st.refusedRow, nowMs);
          if (reason) return refusal(st, reason, need, nowMs);
        }
        const growth = grow(st, need, tokens);
        st.growing = growth;
        try {
          await growth;
        } finally {
          st.growing = undefined;
        }
        grown = true;
        if (st.refusedRow) {
          const later = clock.now().getTime();
          const now = needs(st, tokens);
          const reason = refusing(st, now, st.refusedRow, later);
          if (reason) return refusal(st, reason, now, later);
        }
      }
    },

    /**
     * The call is over: its slot returns, and of its tokens' bound what it did not use (`tokens` null: none
     * used). When the access was at its concurrency limit at the last statement, the freed slot goes back to
     * the window at once (another process may be waiting for it), not when the access goes idle here.
     */
    settle(ticket: RateTicket, tokens: number | null): void {
      if (ticket.settled) return;
      ticket.settled = true;
      const st = ticket.state;
      st.inflight--;
      st.lastUsedMs = clock.now().getTime();
      if (st.limits.tokensPerMinute !== null) st.freeTokens += ticket.tokens - (tokens ?? 0);
      if (!ticket.slot) return;
      if (st.slotsInUse > 0) st.slotsInUse--;
      const spare = st.heldSlots - st.slotsInUse;
      if (spare > 0 && !st.growing && !st.released && st.row.concurrent >= st.limits.concurrentCalls!) {
        st.heldSlots -= spare;
        st.row.concurrent -= spare;
        void giveBack(st, 0, 0, spare, 'a rate-limit slot; it returns after the TTL');
      }
    },

    /** Where the access's limits stand as this process knows them; undefined when it has admitted nothing for it lately. */
    view(accessId: string): RateView | undefined {
      const st = states.get(accessId);
      return st ? viewOf(st, clock.now().getTime()) : undefined;
    },

    /** Gives back everything held unused (tests, shutdown). */
    async drain(): Promise<void> {
      for (const st of [...states.values()]) if (st.inflight === 0) release(st);
      await Promise.allSettled([...releases]);
    },

    close(): void {
      clearInterval(idleTimer);
      clearInterval(heartbeatTimer);
    },
  };
}

export type RateAllowances = ReturnType<typeof createRateAllowances>;
