/**
 * The SQL of a gateway call's records (batched by call-recorder.ts), and of its process's calls under way.
 *
 * A call's records are one statement per batch of calls, composed by
 * src/domain/recording/record-sql.ts: their invocations, each with its
 * attempt, their settlement on their quota leases, their usage events, rollups
 * and thresholds. One round trip, so a busy access's period row is locked for
 * one statement. A call whose lease is no longer HELD (the
 * sweeper reclaimed it: its process stalled past the TTL) is charged on its
 * period directly, unless the reclaim already recorded it from its heartbeat
 * (the record is idempotent by invocation id): once either way.
 * The rows travel as text (call-rows.ts), made when the call ends.
 */
import type { Db } from '../db/database.js';
import { namedQuery, type IdleStatement } from '../db/named-query.js';
import { jsonArray } from '../db/row-json.js';
import { recordArray } from '../db/row-record.js';
import { KIND_COLUMN_TYPES, KIND_COLUMNS } from '../domain/recording/kind-sql.js';
import { recordCallsSql, type RecordedCost } from '../domain/recording/record-sql.js';
import { lockedInIdOrder } from '../domain/recording/settlement-sql.js';
import type { CallRows } from './call-rows.js';

const RECORD_CALLS = recordCallsSql();

/**
 * Calls in flight (the JSON array at placeholder `calls`) on the leases of `held` (a CTE of lease ids),
 * written as they stand at placeholder `at`: one row each in lease_calls, made or updated.
 */
const writeCallsCtes = (held: string, calls: string, at: string) => `x as (
  select * from json_to_recordset(cast(${calls} as json)) as x(invocation_id uuid, lease_id uuid, bound bigint, units bigint, input_tokens bigint,
         cached_tokens bigint, output_tokens bigint, model text, usage_id uuid, adjustment_id uuid, invocation json,
         model_rule text, input_ppm bigint, cached_ppm bigint, output_ppm bigint, cache_write_tokens bigint, reasoning_tokens bigint,
         ${KIND_COLUMN_TYPES})
), calls as (
  insert into lease_calls (invocation_id, lease_id, bound, units, input_tokens, cached_tokens, output_tokens, model, usage_id,
                           adjustment_id, invocation, updated_at, model_rule, input_multiplier_ppm, cached_input_multiplier_ppm,
                           output_multiplier_ppm, cache_write_tokens, reasoning_tokens, ${KIND_COLUMNS.join(', ')})
  select x.invocation_id, x.lease_id, x.bound, x.units, x.input_tokens, x.cached_tokens, x.output_tokens, x.model, x.usage_id,
         x.adjustment_id, x.invocation, cast(${at} as timestamptz), x.model_rule, x.input_ppm, x.cached_ppm, x.output_ppm,
         x.cache_write_tokens, x.reasoning_tokens, ${KIND_COLUMNS.map((c) => `x.${c}`).join(', ')}
    from x
   where x.lease_id in (select id from ${held})
  on conflict (invocation_id) do update
     set units = excluded.units, input_tokens = excluded.input_tokens, cached_tokens = excluded.cached_tokens,
         output_tokens = excluded.output_tokens, model = excluded.model, invocation = excluded.invocation, updated_at = excluded.updated_at,
         cache_write_tokens = excluded.cache_write_tokens, reasoning_tokens = excluded.reasoning_tokens,
         ${KIND_COLUMNS.map((c) => `${c} = excluded.${c}`).join(', ')}
)`;

const namedLeases = 'select cast(value as uuid) from json_array_elements_text(cast($1 as json))';

/**
 * A process's heartbeat: its leases ($1, ids) still HELD now expire at $2, and its calls in flight on them
 * ($3) are written as they stand at $4 (lease_calls). The rows of those leases whose call is recorded
 * already go (a recorded call is never charged by a reclaim: they only take room). Returns the leases
 * renewed: the others are lost. The leases are locked in id order (lockedInIdOrder), before any row of
 * lease_calls.
 */
const HEARTBEAT = `
with renewed as (
  update quota_leases set expires_at = cast($2 as timestamptz)
   where id in ${lockedInIdOrder('quota_leases', namedLeases)}
     and status = 'HELD'
  returning id
), ${writeCallsCtes('renewed', '$3', '$4')}, done as (
  delete from lease_calls c
   where c.lease_id in (select id from renewed)
     and c.invocation_id not in (select invocation_id from x)
     and exists (select from invocations i where i.id = c.invocation_id and i.started_at = cast(c.invocation->>'started_at' as timestamptz))
)
select id from renewed`;

/**
 * A process's snapshot: its calls in flight ($2) on its leases ($1, ids) still HELD, written as they stand
 * at $3. The leases are locked (in id order, as by the heartbeat) and not renewed: that is the
 * heartbeat's. Returns the leases still HELD.
 */
const SNAPSHOT = `
with held as (
  select id from quota_leases
   where id in ${lockedInIdOrder('quota_leases', namedLeases)}
     and status = 'HELD'
), ${writeCallsCtes('held', '$2', '$3')}
select id from held`;

/** The record statement's values of a batch of calls: the arrays of their lease calls ($1) and invocations ($2). */
export function recordValues(calls: CallRows[]): [string, string] {
  const invocations: string[] = [];
  const leaseCalls: string[] = [];
  for (const c of calls) {
    invocations.push(c.invocation);
    if (c.leaseCall) leaseCalls.push(c.leaseCall);
  }
  return [recordArray(leaseCalls), recordArray(invocations)];
}

/** `prepared`: false sends the statements unnamed (behind a transaction pooler: NEXUS_DATABASE_PREPARED_STATEMENTS). */
export function createCallRepo(db: Db, prepared = true) {
  const query = namedQuery(db, prepared);
  return {
    /**
     * Records the calls in one statement (all or nothing); a call recorded already is left as it is. Returns the
     * costs of the calls it charged.
     */
    async record(calls: CallRows[]): Promise<RecordedCost[]> {
      return query<RecordedCost>('nexus_record_calls', RECORD_CALLS, recordValues(calls));
    },

    /**
     * Renews the leases still HELD to `until` and writes the calls in flight on them (`calls`: lease_calls
     * rows as JSON text); returns the ids of the leases renewed.
     */
    async heartbeat(leaseIds: string[], until: Date, calls: string[], now: Date): Promise<Set<string>> {
      const rows = await query<{ id: string }>('nexus_heartbeat', HEARTBEAT, [
        JSON.stringify(leaseIds),
        until.toISOString(),
        jsonArray(calls),
        now.toISOString(),
      ]);
      return new Set(rows.map((r) => r.id));
    },

    /**
     * The named statements above with no call and no lease (they write nothing): what a fresh process's warm-up runs
     * on each pooled connection before its first call (src/gateway/warm-up.ts).
     */
    idleStatements(now: Date): IdleStatement[] {
      const at = now.toISOString();
      return [
        { name: 'nexus_record_calls', text: RECORD_CALLS, values: ['{}', '{}'] },
        { name: 'nexus_heartbeat', text: HEARTBEAT, values: ['[]', at, '[]', at] },
        { name: 'nexus_snapshot', text: SNAPSHOT, values: ['[]', '[]', at] },
      ];
    },

    /** Writes the calls in flight (`calls`) on those of the leases still HELD, without renewing them; returns those. */
    async snapshot(leaseIds: string[], calls: string[], now: Date): Promise<Set<string>> {
      const rows = await query<{ id: string }>('nexus_snapshot', SNAPSHOT, [JSON.stringify(leaseIds), jsonArray(calls), now.toISOString()]);
      return new Set(rows.map((r) => r.id));
    },
  };
}

export type CallRepo = ReturnType<typeof createCallRepo>;
