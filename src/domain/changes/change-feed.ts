/**
 * Changes that decide whether a gateway call is allowed (a key revoked, an access
 * suspended, renewed or moved to another plan, a workspace or a connection archived,
 * a provider key rotated, a plan's rate limits changed) take effect on the next call, on every process.
 *
 * The service that makes such a change announces it inside its transaction:
 * - this process applies it when the transaction commits, before the service returns
 *   (so before the Admin API answers; a billing webhook, once its processing commits);
 * - the other processes hear of it by PostgreSQL NOTIFY, sent in the same transaction,
 *   so it is delivered on commit and never for a change rolled back. Their listener
 *   (src/db/change-listener.ts) hands the payload to `received`.
 *
 * A change names what it touched (kind and id), not what it did: a subscriber drops
 * whatever it holds about that thing and reads it again. On the embedded database
 * (one process) no notification is sent.
 *
 * While the listener's session answers (its pings, change-listener.ts), every change another process committed
 * before the last answered ping's question has been heard and applied here (`heardThrough`): the gateway's key cache
 * then keeps its entries longer than its TTL, which bounds them only when that cannot be vouched for.
 *
 * The same channel carries the output bounds a process learned from an upstream that
 * answers past its calls' bounds (src/gateway/learned-bounds.ts), so every process
 * admits the calls to that connection's model at them: no transaction, nothing to roll back.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import type { Queryable } from '../../db/database.js';
import type { ChangeRepo } from './change-repo.js';

type ChangeKind = 'key' | 'access' | 'workspace' | 'connection' | 'route' | 'plan';

export interface Change {
  kind: ChangeKind;
  id: string;
}

/** An output bound learned from an answer past its call's bound, for every process to admit at. */
export interface LearnedOutput {
  connectionId: string;
  model: string;
  stream: boolean;
  output: bigint;
}

/** What a subscriber is told: one change, or null when anything may have changed (notifications were lost). */
export type ChangeSubscriber = (change: Change | null) => void;

const CODES: Record<ChangeKind, string> = { key: 'k', access: 'a', workspace: 'w', connection: 'c', route: 'r', plan: 'p' };
/** The code of a learned output bound's notification (not a change: nothing to drop). */
const LEARNED_CODE = 'o';
const KINDS = new Map(Object.entries(CODES).map(([kind, code]) => [code, kind as ChangeKind]));
/** PostgreSQL's limit on a channel name (NAMEDATALEN - 1). */
const MAX_CHANNEL = 63;

/** The channel of one database schema's changes: processes on other schemas of the same database do not hear them. */
export function changeChannel(schema: string | undefined): string {
  if (!schema) return 'nexus_changes';
  const channel = `nexus_changes_${schema}`;
  return channel.length <= MAX_CHANNEL ? channel : `nexus_changes_${createHash('sha256').update(schema).digest('hex').slice(0, 32)}`;
}

/** Runs `fn` once the outermost transaction `q` belongs to has committed (at once when `q` is no transaction). */
function afterCommit(q: Queryable, fn: () => void): void {
  let trx = q as Knex.Transaction;
  if (!trx.isTransaction) {
    fn();
    return;
  }
  while (trx.parentTransaction) trx = trx.parentTransaction;
  // A rollback applies nothing (its NOTIFY is dropped too).
  trx.executionPromise.then(fn).catch(() => {});
}

export function createChangeFeed(deps: {
  changeRepo: ChangeRepo;
  /** Where changes are announced to the other processes; null: none can exist (the embedded database). */
  channel: string | null;
}) {
  const { changeRepo, channel } = deps;
  /** Marks this process's notifications: it applied them already, on commit. */
  const origin = randomBytes(4).toString('hex');
  const listeners = new Set<ChangeSubscriber>();
  const learners = new Set<(learned: LearnedOutput) => void>();
  const apply = (change: Change | null) => {
    for (const listener of listeners) listener(change);
  };
  /** Date.now() of the listener's last answered ping (0: none since it last listened). */
  let heardThrough = 0;

  return {
    channel,

    /** In the transaction `tx` that makes the change: applied here on commit, and on the other processes by NOTIFY. */
    async announce(change: Change, tx: Queryable): Promise<void> {
      if (channel) await changeRepo.notify(channel, `${origin} ${CODES[change.kind]} ${change.id}`, tx);
      afterCommit(tx, () => apply(change));
    },

    /** Tells the other processes of an output bound learned here (the model as the request named it). */
    async shareLearned(learned: LearnedOutput, q: Queryable): Promise<void> {
      if (!channel) return;
      const payload = `${origin} ${LEARNED_CODE} ${learned.connectionId} ${learned.stream ? 's' : 'j'} ${learned.output} ${learned.model}`;
      await changeRepo.notify(channel, payload, q);
    },

    /** Told of the output bounds other processes learned. Returns the function that unsubscribes. */
    onLearned(listener: (learned: LearnedOutput) => void): () => void {
      learners.add(listener);
      return () => learners.delete(listener);
    },

    /** Another process's notification (a payload this version cannot read: anything may have changed). */
    received(payload: string): void {
      const words = payload.split(' ');
      const [from, code, id] = words;
      if (from === origin) return;
      if (code === LEARNED_CODE) {
        const [, , connectionId, kind, output] = words;
        const model = words.slice(5).join(' ');
        if (connectionId && (kind === 's' || kind === 'j') && output && /^\d{1,19}$/.test(output)) {
          for (const learner of learners) learner({ connectionId, model, stream: kind === 's', output: BigInt(output) });
        }
        return;
      }
      const kind = code === undefined ? undefined : KINDS.get(code);
      apply(kind && id ? { kind, id } : null);
    },

    /** Notifications may have been missed (the listener was disconnected): everything is read again. */
    missed(): void {
      heardThrough = 0;
      apply(null);
    },

    /** The listener's session answered a ping asked at `askedAt`: every notification sent before it has arrived. */
    heard(askedAt: number): void {
      heardThrough = Math.max(heardThrough, askedAt);
    },

    /** The listener's session is gone: what is announced now is not heard until it listens again (and `missed`). */
    deaf(): void {
      heardThrough = 0;
    },

    /** Date.now() until which every other process's change has been heard here (0: not vouched for). */
    heardThrough: (): number => heardThrough,

    /** Returns the function that unsubscribes. */
    subscribe(listener: ChangeSubscriber): () => void {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}

export type ChangeFeed = ReturnType<typeof createChangeFeed>;
