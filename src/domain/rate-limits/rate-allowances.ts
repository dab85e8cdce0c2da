/**
 * Rate allowances: how a gateway process admits a call against its plan's rate
 * limits without a database round trip on most calls, and without any number of
 * processes admitting more than a limit (docs/rate-limits.md).
 *
 * The quota leases' pattern (quota-leases.ts), per access:
 * - The access's window row (rate_windows) counts what processes were granted:
 *   requests and tokens of the current fixed minute, and the concurrency slots they
 *   hold. A grant is one statement that never takes a figure past its limit
 *   (rate-repo.ts, TAKE), so admission is exact across processes: what a process
 *   admits it was granted.
 * - A process admits in memory against what it holds; when it lacks something it
 *   asks for what is missing plus headroom (RATE_CALLS call's worth, doubling up to
 *   MAX_RATE_CALLS, never more than 1/SHARE of what is left), one statement; calls
 *   arriving meanwhile wait for it.
 * - Tokens: a call is admitted for its bound (the quota's input and output bounds)
 *   and settled to its actual tokens after, the difference returning to what the
 *   process holds in that window.
 * - A slot is held for the call's duration, returned to the process on settle.
 * - An access idle on the process for `idleMs` gives back what the process holds
 *   unused (slots, and the window's requests and tokens): another process may be
 *   refused for at most that long while this one holds unused allowance. A slot
 *   freed while the access is at its concurrency limit goes back at once.
 * - The slots a process holds are in its rate_allowances row, renewed by its
 *   heartbeat; the sweeper frees a dead process's slots after the TTL. What a dead
 *   process was granted of a window stays counted there (it may have used it).
 */
import { newId } from '../../ids.js';
import type { Logger } from '../../observability/logger.js';
import type { Clock } from '../actor.js';
import type { Ask, RateRepo } from './rate-repo.js';
import { WINDOW_MS, windowStartOf, type RateLimits, type RateView } from './rate-types.js';

const RATE_CALLS = 16;
const MAX_RATE_CALLS = 1024;
const SHARE = 8;
/** How long a refusal's figures are trusted, so a client hammering at a limit costs few statements. */
const REFUSAL_MEMORY_MS = 100;

export interface RateTarget {
  workspaceId: string;
  accessId: string;
}

interface AccessState {
  target: RateTarget;
  /** Its rate_allowances row (slots), made at the first grant of a slot. */
  id: string;
  limits: RateLimits;
  /** The minute window its requests and tokens belong to (ms). */
  window: number;
  freeRequests: number;
  freeTokens: number;
  /** What the window row said was granted (requests, tokens) or held (slots) at the last statement, ours included. */
  usedRequests: number;
  usedTokens: number;
  usedSlots: number;
  heldSlots: number;
  slotsInUse: number;
  /** Calls admitted and not settled. */
  inflight: number;
  headroomCalls: number;
  lastUsedMs: number;
  growing: Promise<unknown> | undefined;
  refusedUntilMs: number;
  /** The figures of the last refusal (what the window row said was used). */
  refusedUsed: { requests: number; tokens: number; concurrent: number } | undefined;
  released: boolean;
}

export interface RateTicket {
  readonly state: AccessState;
  readonly window: number;
  readonly tokens: number;
  readonly slot: boolean;
  settled: boolean;
}

export type RateAdmission =
  | { ok: true; ticket: RateTicket; view: RateView }
  | { ok: false; view: RateView; retryAfterS: number; reason: 'requests' | 'tokens' | 'concurrent'; never: boolean };

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
        window: 0,
        freeRequests: 0,
        freeTokens: 0,
        usedRequests: 0,
        usedTokens: 0,
        usedSlots: 0,
        heldSlots: 0,
        slotsInUse: 0,
        inflight: 0,
        headroomCalls: RATE_CALLS,
        lastUsedMs: clock.now().getTime(),
        growing: undefined,
        refusedUntilMs: 0,
        refusedUsed: undefined,
        released: false,
      };
      states.set(target.accessId, st);
    }
    st.limits = limits;
    return st;
  }

  function roll(st: AccessState, w: number): void {
    if (st.window === w) return;
    st.window = w;
    st.freeRequests = 0;
    st.freeTokens = 0;
    st.usedRequests = 0;
    st.usedTokens = 0;
  }

  function viewOf(st: AccessState): RateView {
    const resetAt = new Date(st.window + WINDOW_MS);
    const view: RateView = {};
    const l = st.limits;
    if (l.requestsPerMinute !== null) {
      view.requests = {
        limit: l.requestsPerMinute,
        remaining: Math.max(0, l.requestsPerMinute - st.usedRequests + st.freeRequests),
        resetAt,
      };
    }
    if (l.tokensPerMinute !== null) {
      view.tokens = {
        limit: l.tokensPerMinute,
        remaining: Math.max(0, l.tokensPerMinute - st.usedTokens + Math.max(0, st.freeTokens)),
        resetAt,
      };
    }
    if (l.concurrentCalls !== null) {
      view.concurrent = {
        limit: l.concurrentCalls,
        remaining: Math.max(0, l.concurrentCalls - st.usedSlots + (st.heldSlots - st.slotsInUse)),
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

  /** Which limit refuses `need` given what the window row said was used, if any. */
  function refusing(
    st: AccessState,
    need: { r: number; t: number; c: number },
    used: { requests: number; tokens: number; concurrent: number },
  ) {
    const l = st.limits;
    if (need.r > 0 && used.requests + need.r > l.requestsPerMinute!) return 'requests' as const;
    if (need.t > 0 && used.tokens + need.t > l.tokensPerMinute!) return 'tokens' as const;
    if (need.c > 0 && used.concurrent + need.c > l.concurrentCalls!) return 'concurrent' as const;
    return undefined;
  }

  function refusal(st: AccessState, reason: 'requests' | 'tokens' | 'concurrent', nowMs: number, never = false): RateAdmission {
    // A window's requests and tokens free when it ends; a slot when a call ends, or when another process
    // gives back what it holds unused (within idleMs).
    const retryAfterS =
      reason === 'concurrent' ? Math.max(1, Math.ceil(idleMs / 1000)) : Math.max(1, Math.ceil((st.window + WINDOW_MS - nowMs) / 1000));
    return { ok: false, view: viewOf(st), retryAfterS, reason, never };
  }

  async function grow(st: AccessState, need: { r: number; t: number; c: number }, tokens: number): Promise<void> {
    const l = st.limits;
    const h = st.headroomCalls;
    const ask = (n: number, per: number, limit: number | null): Ask =>
      limit === null ? { need: 0, want: 0, limit: null } : { need: n, want: n + per * h, limit };
    const window = st.window;
    const answer = await repo.take({
      id: st.id,
      workspaceId: st.target.workspaceId,
      accessId: st.target.accessId,
      windowStart: new Date(window),
      requests: ask(need.r, 1, l.requestsPerMinute),
      tokens: ask(need.t, Math.max(tokens, 1), l.tokensPerMinute),
      // Slots are asked one at a time beyond the need: a slot held unused is one another process lacks.
      concurrent:
        l.concurrentCalls === null
          ? { need: 0, want: 0, limit: null }
          : { need: need.c, want: need.c + Math.min(h, 4), limit: l.concurrentCalls },
      share: SHARE,
      expiresAt: new Date(clock.now().getTime() + ttlMs),
    });
    if (st.window !== window) return;
    const g = answer.granted;
    if (!g) {
      st.usedRequests = answer.used.requests;
      st.usedTokens = answer.used.tokens;
      st.usedSlots = answer.used.concurrent;
      st.refusedUsed = answer.used;
      st.refusedUntilMs = clock.now().getTime() + REFUSAL_MEMORY_MS;
      return;
    }
    st.freeRequests += g.requests;
    st.freeTokens += g.tokens;
    st.heldSlots += g.concurrent;
    st.usedRequests = answer.used.requests + g.requests;
    st.usedTokens = answer.used.tokens + g.tokens;
    st.usedSlots = answer.used.concurrent + g.concurrent;
    st.refusedUsed = undefined;
    if (st.headroomCalls < MAX_RATE_CALLS) st.headroomCalls *= 2;
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
    const done = repo
      .giveBack({
        id: st.id,
        accessId: st.target.accessId,
        windowStart: new Date(st.window),
        requests,
        tokens,
        concurrent: Math.max(0, slots),
      })
      .catch((err: Error) => {
        logger.error({
          msg: 'could not give back a rate allowance; its slots return after the TTL',
          accessId: st.target.accessId,
          error: err.message,
        });
      })
      .finally(() => releases.delete(done));
    releases.add(done);
  }

  const idleTimer = setInterval(
    () => {
      const nowMs = clock.now().getTime();
      for (const st of [...states.values()]) if (st.inflight === 0 && nowMs - st.lastUsedMs >= idleMs) release(st);
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
      for (;;) {
        const st = stateOf(target, limits);
        const nowMs = clock.now().getTime();
        roll(st, windowStartOf(nowMs));
        if (limits.tokensPerMinute !== null && tokens > limits.tokensPerMinute) return refusal(st, 'tokens', nowMs, true);
        const need = needs(st, tokens);
        if (need.r === 0 && need.t === 0 && need.c === 0) {
          st.freeRequests -= limits.requestsPerMinute !== null ? 1 : 0;
          st.freeTokens -= limits.tokensPerMinute !== null ? tokens : 0;
          const slot = limits.concurrentCalls !== null;
          if (slot) st.slotsInUse++;
          st.inflight++;
          st.lastUsedMs = nowMs;
          return { ok: true, ticket: { state: st, window: st.window, tokens, slot, settled: false }, view: viewOf(st) };
        }
        if (st.growing) {
          await st.growing.catch(() => {});
          continue;
        }
        if (st.refusedUsed && st.refusedUntilMs > nowMs) {
          const reason = refusing(st, need, st.refusedUsed);
          if (reason) return refusal(st, reason, nowMs);
        }
        const growth = grow(st, need, tokens);
        st.growing = growth;
        try {
          await growth;
        } finally {
          st.growing = undefined;
        }
        if (st.refusedUsed && st.window === windowStartOf(clock.now().getTime())) {
          const reason = refusing(st, needs(st, tokens), st.refusedUsed);
          if (reason) return refusal(st, reason, clock.now().getTime());
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
      if (st.window === ticket.window && st.limits.tokensPerMinute !== null) st.freeTokens += ticket.tokens - (tokens ?? 0);
      if (!ticket.slot) return;
      if (st.slotsInUse > 0) st.slotsInUse--;
      const spare = st.heldSlots - st.slotsInUse;
      if (spare > 0 && !st.growing && !st.released && st.usedSlots >= st.limits.concurrentCalls!) {
        st.heldSlots -= spare;
        st.usedSlots -= spare;
        const done = repo
          .giveBack({
            id: st.id,
            accessId: st.target.accessId,
            windowStart: new Date(st.window),
            requests: 0,
            tokens: 0,
            concurrent: spare,
          })
          .catch((err: Error) => {
            logger.error({
              msg: 'could not give back a rate-limit slot; it returns after the TTL',
              accessId: st.target.accessId,
              error: err.message,
            });
          })
          .finally(() => releases.delete(done));
        releases.add(done);
      }
    },

    /** Where the access's limits stand as this process knows them; undefined when it has admitted nothing for it lately. */
    view(accessId: string): RateView | undefined {
      const st = states.get(accessId);
      if (!st || st.window !== windowStartOf(clock.now().getTime())) return undefined;
      return viewOf(st);
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
