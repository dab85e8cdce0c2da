/**
 * Output bounds learned from answers: what an upstream that ignores the output cap it is sent
 * actually produces, per connection, requested model and kind of answer (JSON or stream), kept by
 * the process.
 *
 * A call is admitted at the larger of its own output bound and what its connection's model was
 * last seen to produce past the bound, so once such an answer has come back the calls admitted
 * after it reserve what they will be charged, and a call that does not fit in the quota any more
 * is refused 429 before the upstream is called. Overspend is then bounded by the calls already
 * admitted when the first such answer came back (the first wave, itself bounded per access until the
 * model's first answer: first-wave.ts). The process that learns a bound tells the
 * others (the change feed's NOTIFY, gateway-parts.ts) when it is new or larger, and again every
 * ANNOUNCE_EVERY_MS while its answers keep coming past their bounds; without a listener (the
 * embedded database, a lost notification) each process learns on its own, one wave each
 * (docs/reliability.md "The output bound").
 *
 * - Learned only from an answer whose reported output is past its call's bound; an answer within
 *   it changes nothing (the upstream may still ignore larger caps).
 * - The largest such output is kept, at most MAX_LEARNED_OUTPUT tokens, and forgotten
 *   LEARNED_FOR_MS after the last answer past its bound: a connection fixed (or a model replaced)
 *   goes back to its calls' own bounds.
 * - Streams learn apart from JSON answers: a stream is cut at its bound as it is relayed, and only
 *   one whose final report says more than it showed teaches a stream bound.
 */
import type { Clock } from '../domain/actor.js';

/** The most output a learned bound admits a call at (above any model's output limit today). */
const MAX_LEARNED_OUTPUT = 1_000_000n;
/** How long a learned bound holds after the last answer past its bound. */
const LEARNED_FOR_MS = 15 * 60_000;
/** How often a bound still being learned is told to the other processes again (they forget it after LEARNED_FOR_MS). */
const ANNOUNCE_EVERY_MS = 5 * 60_000;
/** Connections and models remembered per process; the oldest is dropped first. */
const MAX_LEARNED = 10_000;

export function createLearnedBounds(clock: Clock) {
  const learned = new Map<string, { output: bigint; untilMs: number; announcedMs: number }>();
  const keyOf = (connectionId: string, model: string, stream: boolean) => `${stream ? 's' : 'j'} ${connectionId} ${model}`;

  return {
    /** The output a call on this connection and model is admitted at, at least: 0n when nothing is learned. */
    output(connectionId: string, model: string, stream: boolean): bigint {
      // Nearly always nothing is learned: a call then makes no key.
      if (learned.size === 0) return 0n;
      const key = keyOf(connectionId, model, stream);
      const known = learned.get(key);
      if (!known) return 0n;
      if (known.untilMs <= clock.now().getTime()) {
        learned.delete(key);
        return 0n;
      }
      return known.output;
    },

    /**
     * An answer reported `output` tokens past its call's output bound (or another process said so). Returns
     * the bound to tell the other processes, when it is new, larger, or not told for ANNOUNCE_EVERY_MS.
     */
    observed(connectionId: string, model: string, stream: boolean, output: bigint): bigint | null {
      const key = keyOf(connectionId, model, stream);
      const capped = output < MAX_LEARNED_OUTPUT ? output : MAX_LEARNED_OUTPUT;
      const nowMs = clock.now().getTime();
      const known = learned.get(key);
      if (known && known.untilMs > nowMs) {
        known.untilMs = nowMs + LEARNED_FOR_MS;
        if (capped <= known.output && nowMs - known.announcedMs < ANNOUNCE_EVERY_MS) return null;
        if (capped > known.output) known.output = capped;
        known.announcedMs = nowMs;
        return known.output;
      }
      learned.delete(key);
      if (learned.size >= MAX_LEARNED) learned.delete(learned.keys().next().value!);
      learned.set(key, { output: capped, untilMs: nowMs + LEARNED_FOR_MS, announcedMs: nowMs });
      return capped;
    },

    clear(): void {
      learned.clear();
    },
  };
}

export type LearnedBounds = ReturnType<typeof createLearnedBounds>;
