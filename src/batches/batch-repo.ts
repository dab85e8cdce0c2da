/**
 * The rows of batches (docs/batches.md, migration 20261209010000): the input files Nexus read, the batches admitted
 * on them, and the statements that claim, settle and finish a batch (batch-sql.ts).
 */
import type { Queryable } from '../db/database.js';
import { FINISH_SQL, RECORD_OPERATION_SQL, SETTLE_REQUESTS_SQL } from './batch-sql.js';

interface BatchFileRow {
  id: string;
  workspace_id: string;
  workspace_access_id: string;
  provider_connection_id: string;
  upstream_file_id: string;
  requests: number;
  bound_units: bigint;
  bound_tokens: bigint;
  /** The plan's pricing of each model the file names, by model (StoredPricing). */
  pricing: Record<string, StoredPricing>;
  created_at: Date;
}

/** A model's pricing as a batch keeps it: the rule's pattern and its text multipliers, as decimal strings. */
export interface StoredPricing {
  rule: string | null;
  input: string;
  cached: string;
  output: string;
}

/** PENDING: the provider asked to make it, its answer not yet read (no provider id); OPEN: made; SETTLED: ended and charged. */
type BatchStatus = 'PENDING' | 'OPEN' | 'SETTLED';

export interface BatchRow {
  id: string;
  workspace_id: string;
  workspace_access_id: string;
  provider_connection_id: string;
  inference_key_id: string;
  plan_id: string | null;
  batch_file_id: string;
  /** The provider's id; null while PENDING. */
  upstream_batch_id: string | null;
  path_prefix: string;
  search: string;
  request_id: string;
  endpoint: string;
  model: string;
  invocation_id: string;
  lease_id: string;
  quota_period_id: string;
  status: BatchStatus;
  upstream_status: string;
  requests: number;
  bound_units: bigint;
  settled_requests: number;
  settled_units: bigint;
  cost_micros: bigint;
  output_file_id: string | null;
  error_file_id: string | null;
  created_at: Date;
  expires_at: Date;
  next_poll_at: Date;
  settled_at: Date | null;
}

/** A request read from a batch's output file, to be charged (SETTLE_REQUESTS_SQL's rows). */
export interface SettledRequest {
  custom_id: string;
  /** The request's own id (its usage event's invocation). */
  request_id: string;
  usage_id: string;
  units: string;
  input_tokens: string;
  cached_tokens: string;
  output_tokens: string;
  reasoning_tokens: string | null;
  model: string | null;
  requested_model: string;
  model_rule: string | null;
  input_ppm: string;
  cached_ppm: string;
  output_ppm: string;
}

/** A Batch API request's invocation (unmetered, 0 units). */
interface OperationRecord {
  id: string;
  workspaceId: string;
  accessId: string;
  connectionId: string;
  keyId: string;
  planId: string | null;
  requestId: string;
  method: string;
  endpoint: string;
  status: 'SUCCEEDED' | 'UPSTREAM_ERROR' | 'REJECTED' | 'FAILED';
  errorCode: string | null;
  startedAt: Date;
  completedAt: Date;
  latencyMs: number;
  /** The batch or file it names (the provider's id). */
  upstreamId: string | null;
}

/** Where a batch of an access is found: its connection and the provider's id. */
interface Owned {
  connectionId: string;
  accessId: string;
}

/** What the Batch API's requests read and write: files, batches, pages of them. */
function requestRows(db: Queryable) {
  return {
    async insertFile(row: BatchFileRow): Promise<void> {
      await db('batch_files').insert({ ...row, pricing: JSON.stringify(row.pricing) });
    },

    /** The input file an access uploaded through Nexus on a connection. */
    async findFile(o: Owned, upstreamFileId: string): Promise<BatchFileRow | undefined> {
      return db('batch_files')
        .where({ provider_connection_id: o.connectionId, workspace_access_id: o.accessId, upstream_file_id: upstreamFileId })
        .first();
    },

    /** Whether the access may read a provider file: one it uploaded, or the output or error file of one of its batches. */
    async ownsFile(o: Owned, upstreamFileId: string): Promise<boolean> {
      const row = await db.raw<{ rows: { owned: boolean }[] }>(
        `select exists (select 1 from batch_files where provider_connection_id = :c and workspace_access_id = :a and upstream_file_id = :f)
             or exists (select 1 from batches where provider_connection_id = :c and workspace_access_id = :a
                          and (output_file_id = :f or error_file_id = :f)) as owned`,
        { c: o.connectionId, a: o.accessId, f: upstreamFileId },
      );
      return row.rows[0]!.owned;
    },

    async insertBatch(row: Omit<BatchRow, 'settled_requests' | 'settled_units' | 'cost_micros' | 'settled_at'>): Promise<void> {
      await db('batches').insert(row);
    },

    /** A PENDING batch made upstream: its provider id and status, polled first at `nextPollAt`. False: it was not PENDING. */
    async opened(id: string, upstreamBatchId: string, upstreamStatus: string, nextPollAt: Date): Promise<boolean> {
      const n = await db('batches')
        .where({ id, status: 'PENDING' })
        .update({ status: 'OPEN', upstream_batch_id: upstreamBatchId, upstream_status: upstreamStatus, next_poll_at: nextPollAt });
      return n > 0;
    },

    /** A PENDING batch the provider did not make: its row gone (and an inline batch's file row), its lease released before. */
    async dropPending(id: string): Promise<void> {
      const row: { batch_file_id: string } | undefined = await db('batches').where({ id, status: 'PENDING' }).first('batch_file_id');
      if (!row) return;
      await db('batches').where({ id, status: 'PENDING' }).delete();
      await db('batch_files').where({ id: row.batch_file_id }).where('upstream_file_id', 'like', 'inline:%').delete();
    },

    /** Whether a provider batch id is one of a connection's batches already (a PENDING batch is not matched to it). */
    async known(connectionId: string, upstreamBatchId: string): Promise<boolean> {
      const row = await db('batches').where({ provider_connection_id: connectionId, upstream_batch_id: upstreamBatchId }).first('id');
      return row !== undefined;
    },

    async findBatch(o: Owned, upstreamBatchId: string): Promise<BatchRow | undefined> {
      return db('batches')
        .where({ provider_connection_id: o.connectionId, workspace_access_id: o.accessId, upstream_batch_id: upstreamBatchId })
        .first();
    },

    async byId(id: string): Promise<BatchRow | undefined> {
      return db('batches').where({ id }).first();
    },

    /**
     * A page of the access's batches on a connection, newest first (by when they were made, then their row's id):
     * the provider ids of up to `limit` of them after the batch `after` (older), or before `before` (newer), and
     * whether there are more that way. A cursor that is not one of the access's batches starts from the newest.
     */
    async page(
      o: Owned,
      p: { after?: string | undefined; before?: string | undefined; limit: number },
    ): Promise<{ ids: string[]; more: boolean }> {
      const mine = () =>
        db('batches').where({ provider_connection_id: o.connectionId, workspace_access_id: o.accessId }).whereNotNull('upstream_batch_id');
      const cursor = p.before ?? p.after;
      const at: { created_at: Date; id: string } | undefined = cursor
        ? await mine().where({ upstream_batch_id: cursor }).first('created_at', 'id')
        : undefined;
      const newer = p.before !== undefined && at !== undefined;
      const q = mine();
      if (at) q.whereRaw(`(created_at, id) ${newer ? '>' : '<'} (?, ?)`, [at.created_at, at.id]);
      const order = newer ? 'asc' : 'desc';
      const rows: { upstream_batch_id: string }[] = await q
        .orderBy([
          { column: 'created_at', order },
          { column: 'id', order },
        ])
        .limit(p.limit + 1)
        .select('upstream_batch_id');
      const ids = rows.slice(0, p.limit).map((row) => row.upstream_batch_id);
      return { ids: newer ? ids.reverse() : ids, more: rows.length > p.limit };
    },

    /** The output and error files a batch's answer named (what its access may then read). */
    async noteFiles(id: string, outputFileId: string | null, errorFileId: string | null): Promise<void> {
      await db('batches')
        .where({ id })
        .update({
          output_file_id: db.raw('coalesce(?, output_file_id)', [outputFileId]),
          error_file_id: db.raw('coalesce(?, error_file_id)', [errorFileId]),
        });
    },
  };
}

/** What the settlement reads and writes: the claims, the charges, the finish, the connection polled. */
function settlementRows(db: Queryable) {
  return {
    /**
     * Up to `limit` PENDING or OPEN batches due by `now`, claimed for `claimMs`: their next poll pushed past the claim in the
     * statement that takes them (skip locked: processes claiming at once take each batch once). A process that dies
     * with a claim leaves the batch to the first claim after it.
     */
    async claimDue(now: Date, claimMs: number, limit: number): Promise<BatchRow[]> {
      const result = await db.raw<{ rows: BatchRow[] }>(
        `update batches set next_poll_at = cast(:until as timestamptz)
          where id in (select id from batches where status in ('PENDING', 'OPEN') and next_poll_at <= :now
                        order by next_poll_at limit :limit for update skip locked)
          returning *`,
        { now, until: new Date(now.getTime() + claimMs), limit },
      );
      return result.rows;
    },

    /** The provider's status seen, and the next poll. */
    async polled(id: string, upstreamStatus: string, nextPollAt: Date): Promise<void> {
      await db('batches').where({ id, status: 'OPEN' }).update({ upstream_status: upstreamStatus, next_poll_at: nextPollAt });
    },

    /** Charges the requests (once each); returns how many were charged now and their units. */
    async settleRequests(batchId: string, rows: SettledRequest[], now: Date): Promise<{ requests: number; units: bigint }> {
      const result = await db.raw<{ rows: { requests: bigint; units: bigint }[] }>(SETTLE_REQUESTS_SQL, {
        batchId,
        now,
        rows: JSON.stringify(rows),
      });
      const row = result.rows[0]!;
      return { requests: Number(row.requests), units: BigInt(row.units) };
    },

    /** The batch settled (FINISH_SQL); undefined when it was already. */
    async finish(
      batchId: string,
      f: { now: Date; upstreamStatus: string; status: string; errorCode: string | null },
    ): Promise<BatchRow | undefined> {
      const result = await db.raw<{ rows: BatchRow[] }>(FINISH_SQL, { batchId, ...f });
      return result.rows[0];
    },

    /** The provider's id of a batch's input file. */
    async upstreamFileId(fileId: string): Promise<string> {
      const row: { upstream_file_id: string } = await db('batch_files').where({ id: fileId }).first('upstream_file_id');
      return row.upstream_file_id;
    },

    /** A Batch API request recorded as an unmetered invocation (RECORD_OPERATION_SQL). */
    async recordOperation(o: OperationRecord): Promise<void> {
      await db.raw(RECORD_OPERATION_SQL, { ...o });
    },

    /** The pricing of each model of a batch's input file. */
    async filePricing(fileId: string): Promise<Record<string, StoredPricing>> {
      const row: { pricing: Record<string, StoredPricing> } = await db('batch_files').where({ id: fileId }).first('pricing');
      return row.pricing;
    },

    /** What the poller needs of a connection: its base URL, its sealed key, its protocol. */
    async connection(
      id: string,
    ): Promise<
      | { id: string; base_url: string; api_key_ciphertext: string; api_key_key_id: string; protocol_profile: string; status: string }
      | undefined
    > {
      return db('provider_connections')
        .where({ id })
        .first('id', 'base_url', 'api_key_ciphertext', 'api_key_key_id', 'protocol_profile', 'status');
    },
  };
}

export function createBatchRepo(db: Queryable) {
  return { ...requestRows(db), ...settlementRows(db) };
}

export type BatchRepo = ReturnType<typeof createBatchRepo>;
