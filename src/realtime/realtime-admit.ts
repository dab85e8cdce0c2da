/**
 * A Realtime turn's admission (docs/realtime.md, "What is admitted, and when"): the key's row (as cached) authorized
 * again, the budget, the model, the plan's tokens per minute at the turn's bound, and that bound on the access's
 * quota lease. A refusal is an AppError: `rate_limited` leaves the session open (the client may ask again once the
 * minute has room), any other closes it once no turn is in flight (realtime-session.ts).
 */
import { AppError, toAppError } from '../errors.js';
import type { RateTicket } from '../domain/rate-limits/rate-allowances.js';
import { limitsOf } from '../domain/rate-limits/rate-service.js';
import { boundUnits, MAX_CALL_UNITS } from '../domain/quota/quota-math.js';
import { assertBudget, assertModelAllowed, authorizeCall } from '../gateway/admission.js';
import type { CacheEntry } from '../gateway/auth-cache.js';
import type { CallMeter } from '../gateway/call-meter.js';
import type { AuthRow } from '../gateway/auth-repo.js';
import { Turn, type TurnContext } from './realtime-turn.js';

/** The output bound of a turn whose plan names no maxOutputTokens. */
export const DEFAULT_OUTPUT_BOUND = 4096n;

/** What a turn is admitted with. */
export interface TurnAsk {
  ctx: TurnContext;
  /** The key's row as the cache has it now, and read again bypassing the cache (the period was found over). */
  lookup(): Promise<CacheEntry>;
  reload(): Promise<CacheEntry>;
  /** Begun by the client's `response.create` (false: a server-VAD turn, already under way). */
  byClient: boolean;
  /** The output cap its `response.create` asks for. */
  asked: number | 'inf' | undefined;
  /** The session's output cap, as the provider last stated it. */
  sessionCap: number | 'inf' | undefined;
  /** The conversation so far: its input bound. */
  conversation: bigint;
}

/**
 * The turn's tokens on the plan's tokens per minute (none: the plan sets no such limit): its input and output bounds,
 * as a call's, settled to what it used when it is recorded. Only tokens are asked for: the session took the request
 * and holds the concurrency slot. Throws 429 rate_limited naming `tokensPerMinute`.
 */
async function admitTokens(meter: CallMeter, auth: AuthRow, tokens: bigint): Promise<RateTicket | undefined> {
  const limits = limitsOf(auth);
  if (limits.tokensPerMinute === null) return undefined;
  const counted = tokens > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(tokens);
  const admitted = await meter.rates.admit({ workspaceId: auth.workspace_id, accessId: auth.workspace_access_id }, limits, counted, true);
  if (admitted.ok) return admitted.ticket;
  const message = admitted.never
    ? `This turn may use up to ${counted} tokens (the conversation so far and its output bound), more than the plan's ${limits.tokensPerMinute} tokens per minute`
    : `This turn may use up to ${counted} tokens and the plan's ${limits.tokensPerMinute} tokens per minute are used up; retry after ${admitted.retryAfterS} s`;
  throw new AppError('rate_limited', message, {
    param: 'tokensPerMinute',
    retry_after: admitted.never ? undefined : admitted.retryAfterS,
  });
}

/** The turn's output bound: the cap it asks for, else the session's, at most the plan's maxOutputTokens (or the default). */
function outputBound(auth: AuthRow, ask: TurnAsk): bigint {
  const planMax = auth.max_output_tokens ? BigInt(auth.max_output_tokens) : DEFAULT_OUTPUT_BOUND;
  const { asked, sessionCap } = ask;
  const over = typeof asked === 'number' && auth.max_output_tokens && asked > auth.max_output_tokens;
  if (ask.byClient && over && auth.output_cap_policy === 'refuse') {
    throw new AppError('max_tokens_exceeded', `This turn asks for up to ${asked} output tokens; the plan allows ${planMax}`, {
      param: 'max_output_tokens',
    });
  }
  const cap = typeof asked === 'number' ? asked : asked === 'inf' ? undefined : typeof sessionCap === 'number' ? sessionCap : undefined;
  return cap !== undefined && BigInt(cap) < planMax ? BigInt(cap) : planMax;
}

/** Admits a turn: resolves with it (its bound held on the lease, its tokens on the plan's minute), or the refusal. */
export async function admitTurn(ask: TurnAsk): Promise<Turn | AppError> {
  const { ctx } = ask;
  const { meter } = ctx;
  try {
    let entry = await ask.lookup();
    for (let reloaded = false; ; reloaded = true) {
      const now = meter.clock.now();
      const auth = authorizeCall(entry.row, now);
      assertBudget(auth, now);
      const policy = meter.modelPolicy(auth);
      assertModelAllowed(policy, ctx.model);
      const pricing = policy.pricingFor(ctx.model);
      const output = outputBound(auth, ask);
      const bound = boundUnits(ask.conversation, output, pricing);
      if (!auth.period_id || !auth.period_end) throw new AppError('quota_insufficient', 'The access has no current quota period');
      if (bound > MAX_CALL_UNITS)
        throw new AppError('quota_insufficient', `This turn may need up to ${bound} units, more than a period holds`);
      const rate = await admitTokens(meter, auth, ask.conversation + output);
      const target = { workspaceId: auth.workspace_id, accessId: auth.workspace_access_id, periodId: auth.period_id };
      const held = await meter.leases.admit(target, bound).catch((err: unknown) => {
        if (rate) meter.rates.settle(rate, null);
        throw err;
      });
      if (held.ok) {
        // Not yet a call under way: the session makes it one once it is sent (or runs).
        const turn = new Turn(ctx, now, ask.byClient, ask.conversation, output, pricing);
        turn.admission = held.admission;
        turn.rateTicket = rate;
        return turn;
      }
      if (rate) meter.rates.settle(rate, null);
      if (held.periodOver && !reloaded) {
        entry = await ask.reload();
        continue;
      }
      throw new AppError('quota_insufficient', `This turn may need up to ${bound} units; ${held.available} are available`, {
        reset_at: auth.period_end.toISOString(),
      });
    }
  } catch (err) {
    return toAppError(err);
  }
}
