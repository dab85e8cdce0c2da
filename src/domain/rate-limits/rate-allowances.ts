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
 *
 * Here: a call's admission and settlement. What the process holds per access, the constants named above, the
 * grants, the give-backs and the idle and heartbeat passes: allowance-state.ts.
 */
import { bindDeps } from '../bind.js';
import {
  expire,
  giveBack,
  grow,
  needs,
  release,
  releaseIdle,
  renewSlots,
  stateOf,
  used,
  viewOf,
  type AccessState,
  type AllowanceDeps,
  type Allowances,
  type Need,
  type RateTarget,
  type RowFigures,
} from './allowance-state.js';
import { secondsUntilFit, type RateLimits, type RateView } from './rate-types.js';

export type { RateTarget } from './allowance-state.js';

const EPSILON = 1e-6;

export interface RateTicket {
  readonly state: AccessState;
  readonly tokens: number;
  readonly slot: boolean;
  settled: boolean;
}

type Reason = 'requests' | 'tokens' | 'concurrent';

type RateAdmission =
  { ok: true; ticket: RateTicket; view: RateView } | { ok: false; view: RateView; retryAfterS: number; reason: Reason; never: boolean };

/** Which limit refuses `need` at `nowMs` given what the window row said, if any. */
function refusing(st: AccessState, need: Need, row: RowFigures, nowMs: number): Reason | undefined {
  const l = st.limits;
  const u = used(row, nowMs);
  if (need.r > 0 && u.r + need.r > l.requestsPerMinute! + EPSILON) return 'requests';
  if (need.t > 0 && u.t + need.t > l.tokensPerMinute! + EPSILON) return 'tokens';
  if (need.c > 0 && row.concurrent + need.c > l.concurrentCalls!) return 'concurrent';
  return undefined;
}

function refusal(
  allowances: Allowances,
  st: AccessState,
  reason: Reason,
  need: { r: number; t: number },
  nowMs: number,
  never = false,
): RateAdmission {
  // Requests and tokens fit again when enough of the schedule has drained; a slot frees when a call ends,
  // or when another process gives back what it holds unused (within idleMs).
  const u = used(st.refusedRow ?? st.row, nowMs);
  const l = st.limits;
  const retryAfterS =
    reason === 'requests'
      ? secondsUntilFit(u.r, l.requestsPerMinute!, need.r)
      : reason === 'tokens'
        ? secondsUntilFit(u.t, l.tokensPerMinute!, need.t)
        : Math.max(1, Math.ceil(allowances.idleMs / 1000));
  return { ok: false, view: viewOf(st, nowMs), retryAfterS, reason, never };
}

/** The call is admitted on what the process holds for the access (`tokensOnly`: its tokens alone). */
function admitHeld(st: AccessState, limits: RateLimits, tokens: number, nowMs: number, tokensOnly: boolean): RateAdmission {
  st.freeRequests -= limits.requestsPerMinute !== null && !tokensOnly ? 1 : 0;
  st.freeTokens -= limits.tokensPerMinute !== null ? tokens : 0;
  const slot = limits.concurrentCalls !== null && !tokensOnly;
  if (slot) st.slotsInUse++;
  st.inflight++;
  st.lastUsedMs = nowMs;
  return { ok: true, ticket: { state: st, tokens, slot, settled: false }, view: viewOf(st, nowMs) };
}

/** One grant for the access, the only one under way: other calls wait for it. */
async function growOnce(allowances: Allowances, st: AccessState, need: Need, tokens: number): Promise<void> {
  const growth = grow(allowances, st, need, tokens);
  st.growing = growth;
  try {
    await growth;
  } finally {
    st.growing = undefined;
  }
}

/** After a grant was refused: the refusal, when the row's figures still refuse what the call lacks now. */
function refusedAfterGrowth(allowances: Allowances, st: AccessState, tokens: number, tokensOnly: boolean): RateAdmission | undefined {
  if (!st.refusedRow) return undefined;
  const later = allowances.clock.now().getTime();
  const now = needs(st, tokens, tokensOnly);
  const reason = refusing(st, now, st.refusedRow, later);
  return reason ? refusal(allowances, st, reason, now, later) : undefined;
}

/**
 * Admits a call of at most `tokens` tokens on the access's limits, or says which limit refuses it and for how long.
 * `tokensOnly`: only its tokens are asked for, no request and no slot (a Realtime session's turn: its session took
 * the request and holds the slot).
 */
async function admit(
  allowances: Allowances,
  target: RateTarget,
  limits: RateLimits,
  tokens: number,
  tokensOnly = false,
): Promise<RateAdmission> {
  // Right after its own grant a call uses it, however long the statement took.
  let grown = false;
  for (;;) {
    const st = stateOf(allowances, target, limits);
    const nowMs = allowances.clock.now().getTime();
    if (limits.tokensPerMinute !== null && tokens > limits.tokensPerMinute) {
      return refusal(allowances, st, 'tokens', { r: 0, t: tokens }, nowMs, true);
    }
    if (!grown) expire(allowances, st, nowMs);
    const need = needs(st, tokens, tokensOnly);
    if (need.r === 0 && need.t === 0 && need.c === 0) return admitHeld(st, limits, tokens, nowMs, tokensOnly);
    if (st.growing) {
      await st.growing.catch(() => {});
      continue;
    }
    if (st.refusedRow && st.refusedUntilMs > nowMs) {
      const reason = refusing(st, need, st.refusedRow, nowMs);
      if (reason) return refusal(allowances, st, reason, need, nowMs);
    }
    await growOnce(allowances, st, need, tokens);
    grown = true;
    const refused = refusedAfterGrowth(allowances, st, tokens, tokensOnly);
    if (refused) return refused;
  }
}

/**
 * The call is over: its slot returns, and of its tokens' bound what it did not use (`tokens` null: none
 * used). When the access was at its concurrency limit at the last statement, the freed slot goes back to
 * the window at once (another process may be waiting for it), not when the access goes idle here.
 */
function settle(allowances: Allowances, ticket: RateTicket, tokens: number | null): void {
  if (ticket.settled) return;
  ticket.settled = true;
  const st = ticket.state;
  st.inflight--;
  st.lastUsedMs = allowances.clock.now().getTime();
  if (st.limits.tokensPerMinute !== null) st.freeTokens += ticket.tokens - (tokens ?? 0);
  if (!ticket.slot) return;
  if (st.slotsInUse > 0) st.slotsInUse--;
  const spare = st.heldSlots - st.slotsInUse;
  if (spare > 0 && !st.growing && !st.released && st.row.concurrent >= st.limits.concurrentCalls!) {
    st.heldSlots -= spare;
    st.row.concurrent -= spare;
    void giveBack(allowances, st, { requests: 0, tokens: 0, slots: spare }, 'a rate-limit slot; it returns after the TTL');
  }
}

/**
 * Tokens a call still under way has used (a Realtime session's turn): counted now against the access's tokens per
 * minute, as a settled call's are, instead of when the call ends (whose settle then counts only the rest).
 */
function spend(allowances: Allowances, ticket: RateTicket, tokens: number): void {
  const st = ticket.state;
  if (ticket.settled || st.limits.tokensPerMinute === null) return;
  st.freeTokens -= tokens;
  st.lastUsedMs = allowances.clock.now().getTime();
}

/** Where the access's limits stand as this process knows them; undefined when it has admitted nothing for it lately. */
function view(allowances: Allowances, accessId: string): RateView | undefined {
  const st = allowances.states.get(accessId);
  return st ? viewOf(st, allowances.clock.now().getTime()) : undefined;
}

/** Gives back everything held unused (tests, shutdown). */
async function drain(allowances: Allowances): Promise<void> {
  for (const st of [...allowances.states.values()]) if (st.inflight === 0) release(allowances, st);
  await Promise.allSettled([...allowances.releases]);
}

function close(allowances: Allowances): void {
  for (const timer of allowances.timers) clearInterval(timer);
}

export function createRateAllowances(deps: AllowanceDeps) {
  const allowances: Allowances = { ...deps, states: new Map(), releases: new Set(), timers: [] };
  const idle = setInterval(() => releaseIdle(allowances), Math.max(10, Math.floor(deps.idleMs / 2)));
  const heartbeat = setInterval(() => renewSlots(allowances), Math.max(20, Math.floor(deps.ttlMs / 5)));
  for (const timer of [idle, heartbeat]) timer.unref();
  allowances.timers.push(idle, heartbeat);
  return bindDeps(allowances, { admit, settle, spend, view, drain, close });
}

export type RateAllowances = ReturnType<typeof createRateAllowances>;
