/** All SQL of inference_keys. */
import type { Queryable } from '../../db/database.js';
import { bindDeps } from '../bind.js';
import { paginate, type Page, type PageRequest } from '../pagination.js';

export interface InferenceKeyRow {
  id: string;
  workspace_id: string;
  workspace_access_id: string;
  name: string;
  prefix: string;
  key_hash: string;
  expires_at: Date;
  revoked_at: Date | null;
  last_request_at: Date | null;
  created_at: Date;
}

async function insert(db: Queryable, row: InferenceKeyRow, q: Queryable = db): Promise<InferenceKeyRow> {
  const [created] = await q('inference_keys').insert(row).returning('*');
  return created as InferenceKeyRow;
}

async function find(db: Queryable, accessId: string, keyId: string, q: Queryable = db): Promise<InferenceKeyRow | undefined> {
  return q('inference_keys').where({ id: keyId, workspace_access_id: accessId }).first();
}

async function findById(db: Queryable, keyId: string, q: Queryable = db): Promise<InferenceKeyRow | undefined> {
  return q('inference_keys').where({ id: keyId }).first();
}

async function revoke(_db: Queryable, id: string, at: Date, q: Queryable): Promise<void> {
  await q('inference_keys').where({ id }).whereNull('revoked_at').update({ revoked_at: at });
}

/**
 * Keys not revoked that expire within (now, until] and were not yet announced as expiring, marked
 * announced (at `now`); SKIP LOCKED, so processes sweeping at once announce each key once.
 */
async function markExpiring(_db: Queryable, now: Date, until: Date, q: Queryable): Promise<InferenceKeyRow[]> {
  return q('inference_keys')
    .whereIn(
      'id',
      q('inference_keys')
        .select('id')
        .whereNull('revoked_at')
        .whereNull('expiring_notified_at')
        .where('expires_at', '>', now)
        .where('expires_at', '<=', until)
        .limit(500)
        .forUpdate()
        .skipLocked(),
    )
    .update({ expiring_notified_at: now })
    .returning('*');
}

async function list(db: Queryable, filter: PageRequest & { accessId: string }, q: Queryable = db): Promise<Page<InferenceKeyRow>> {
  return paginate<InferenceKeyRow>(q('inference_keys').select('*').where({ workspace_access_id: filter.accessId }), filter);
}

/**
 * The gateway's lastRequestAt: written at most once a minute per key, so a
 * busy key costs one small UPDATE a minute, not one per call.
 */
async function touchLastRequest(db: Queryable, id: string, at: Date, q: Queryable = db): Promise<boolean> {
  const minuteAgo = new Date(at.getTime() - 60_000);
  const n = await q('inference_keys')
    .where({ id })
    .where((w) => void w.whereNull('last_request_at').orWhere('last_request_at', '<=', minuteAgo))
    .update({ last_request_at: at });
  return Number(n) > 0;
}

export const createInferenceKeyRepo = (db: Queryable) =>
  bindDeps(db, { insert, find, findById, revoke, markExpiring, list, touchLastRequest });

export type InferenceKeyRepo = ReturnType<typeof createInferenceKeyRepo>;
