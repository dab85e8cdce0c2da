/**
 * The first wave of JSON calls to a model on a connection, bounded (docs/reliability.md "The first wave").
 *
 * A JSON answer reaches the gateway whole, so an upstream that ignores the output cap it was sent is charged
 * what it produced, past the call's bound (metered-call.ts). Once one such answer has come back, the calls
 * after it are admitted at what it produced (learned-bounds.ts); the calls admitted before it are the first
 * wave, and nothing bounded how many there were. So, while a connection's model has not answered a JSON call
 * in this process yet (and no other process has told this one of a bound learned on it), an access may have
 * at most `limit` JSON calls to it under way here; the others wait, in their order, for one of these to end.
 *
 * - When one of them is answered with its usage, within its bound or past it, the connection's model has its
 *   history: every call waiting for it goes on at once, admitted at the bound learned if it was past its
 *   own, and later calls are not held again (the history is kept for the process's life, up to MAX_KNOWN
 *   connections and models, the oldest dropped first).
 * - When one ends without usage (an upstream error, a timeout, a refusal for quota), its place goes to the next
 *   call waiting.
 * - A call that has waited `waitMs` is refused 429 `first_wave_limited` with Retry-After, which the official
 *   SDKs retry.
 *
 * Streams are not held: a stream is cut at its bound as it is relayed (sse-meter.ts). Calls to a model with
 * history pay one Map lookup.
 */
import { AppError } from '../errors.js';

/** Connections and models whose history this process keeps; the oldest is dropped first. */
const MAX_KNOWN = 10_000;
/** Seconds a call refused for waiting too long is told to wait before it retries. */
const RETRY_AFTER_S = 1;

/** A place among the calls of a first wave, held by one call until it ends. */
export interface FirstWaveSlot {
  readonly model: string;
  readonly lane: Lane;
}

interface Waiter {
  /** Its place (a slot freed for it), or undefined: the model has its history now, the call is not held. */
  resolve(slot: FirstWaveSlot | undefined): void;
  reject(err: AppError): void;
  timer: NodeJS.Timeout;
}

/** An access's calls to one connection's model while it has no history. */
interface Lane {
  readonly key: string;
  readonly accessId: string;
  running: number;
  readonly waiting: Waiter[];
}

export interface FirstWaveOptions {
  /** JSON calls per access to a connection's model without history, under way at once. */
  limit: number;
  /** How long a call beyond them waits for a place or the model's history before it is refused. */
  waitMs: number;
}

export function createFirstWave(options: FirstWaveOptions) {
  const { limit, waitMs } = options;
  /** Connections and models that have answered a JSON call with its usage (or whose bound another process taught). */
  const known = new Set<string>();
  /** The lanes of the connections and models without history, by `${connectionId} ${model}`, then by access. */
  const lanes = new Map<string, Map<string, Lane>>();
  const keyOf = (connectionId: string, model: string) => `${connectionId} ${model}`;

  function laneOf(key: string, accessId: string): Lane {
    let byAccess = lanes.get(key);
    if (!byAccess) lanes.set(key, (byAccess = new Map()));
    let lane = byAccess.get(accessId);
    if (!lane) byAccess.set(accessId, (lane = { key, accessId, running: 0, waiting: [] }));
    return lane;
  }

  function dropIfIdle(lane: Lane): void {
    if (lane.running > 0 || lane.waiting.length > 0) return;
    const byAccess = lanes.get(lane.key);
    byAccess?.delete(lane.accessId);
    if (byAccess?.size === 0) lanes.delete(lane.key);
  }

  /** The connection's model has its history: every call waiting for it goes on, not held. */
  function learnedKey(key: string): void {
    if (!known.has(key)) {
      if (known.size >= MAX_KNOWN) known.delete(known.values().next().value!);
      known.add(key);
    }
    const byAccess = lanes.get(key);
    if (!byAccess) return;
    for (const lane of byAccess.values()) {
      for (const waiter of lane.waiting.splice(0)) {
        clearTimeout(waiter.timer);
        waiter.resolve(undefined);
      }
      dropIfIdle(lane);
    }
  }

  return {
    /**
     * A JSON call of `accessId` to `model` on `connectionId`, before its quota is admitted: undefined when the model
     * has its history (the call is not held); else its place in the first wave, at once or once one frees (or
     * undefined, should the model get its history meanwhile). Throws 429 `first_wave_limited` after `waitMs`.
     */
    enter(accessId: string, connectionId: string, model: string): FirstWaveSlot | undefined | Promise<FirstWaveSlot | undefined> {
      const key = keyOf(connectionId, model);
      if (known.has(key)) return undefined;
      const lane = laneOf(key, accessId);
      if (lane.running < limit) {
        lane.running++;
        return { model, lane };
      }
      return new Promise<FirstWaveSlot | undefined>((resolve, reject) => {
        const waiter: Waiter = {
          resolve,
          reject,
          timer: setTimeout(() => {
            const at = lane.waiting.indexOf(waiter);
            if (at >= 0) lane.waiting.splice(at, 1);
            dropIfIdle(lane);
            reject(
              new AppError(
                'first_wave_limited',
                `The first calls to '${model}' on this connection are limited to ${limit} at a time until one is answered; this one waited ${Math.round(waitMs / 1000)} s`,
                { param: 'model', retry_after: RETRY_AFTER_S },
              ),
            );
          }, waitMs),
        };
        waiter.timer.unref();
        lane.waiting.push(waiter);
      });
    },

    /**
     * The call holding `slot` ended: `answered`, with its usage read from a JSON answer (the model has its
     * history now); otherwise its place goes to the next call waiting.
     */
    leave(slot: FirstWaveSlot, answered: boolean): void {
      const { lane } = slot;
      lane.running--;
      if (answered) {
        learnedKey(lane.key);
      } else if (lane.waiting.length > 0) {
        const next = lane.waiting.shift()!;
        clearTimeout(next.timer);
        lane.running++;
        next.resolve({ model: slot.model, lane });
      }
      dropIfIdle(lane);
    },

    /** Another process learned an output bound for this connection's model (the change feed): it has its history. */
    learned(connectionId: string, model: string): void {
      learnedKey(keyOf(connectionId, model));
    },

    /** The calls waiting are refused (the server is shutting down: they retry on another process). */
    cut(): void {
      for (const byAccess of lanes.values()) {
        for (const lane of byAccess.values()) {
          for (const waiter of lane.waiting.splice(0)) {
            clearTimeout(waiter.timer);
            waiter.reject(
              new AppError('first_wave_limited', 'The server shut down while this call waited', { retry_after: RETRY_AFTER_S }),
            );
          }
        }
      }
    },

    /** Forgets every history (tests). */
    clear(): void {
      known.clear();
    },
  };
}

export type FirstWave = ReturnType<typeof createFirstWave>;
