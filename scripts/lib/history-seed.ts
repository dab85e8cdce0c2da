/**
 * bench:history's seed (scripts/bench-history.ts): a tenant's calls and usage events written by COPY over months,
 * a million rows of each table at a time, under a plan kept in the seeded database so that a seed stopped midway
 * resumes where it stopped; the months made beforehand, and the rollups computed from the rows afterwards.
 */
import type pg from 'pg';
import { rebuildWorkspaceRollupsSql, ROLLUP_TABLES } from '../../src/domain/recording/rollup-sql.js';
import type { Tenant } from '../../test/support/tenant.js';
import { copyRows, USAGE_EVENT_SEED_COLUMNS, uuidAt } from './copy-rows.js';

const SEED_CHUNK = 1_000_000;
const DAY_MS = 86_400_000;

/** The tenant a seed writes for: its workspace, connection, plan and users. */
export type BenchTenant = Pick<Tenant, 'workspaceId' | 'connectionId' | 'users' | 'planId'>;

export interface Seat {
  accessId: string;
  keyId: string;
  periodId: string;
}

/**
 * A seed's plan, kept in its database (bench_history_seed) so that a seed stopped midway resumes where it stopped:
 * `total` rows of each table spread over `months` months up to `endMs`, `seeded` of them written (whole chunks), the
 * rollups computed from the first `rolledUp`.
 */
export interface SeedPlan {
  endMs: number;
  total: number;
  seeded: number;
  rolledUp: number;
}

/** The database's seed plan: the one it keeps, else a new one of `total` rows up to yesterday (undefined: none kept). */
export async function seedPlanOf(client: pg.Client, total?: number): Promise<SeedPlan | undefined> {
  const kept = await client.query<{ exists: boolean }>(`select to_regclass('bench_history_seed') is not null as exists`);
  if (!kept.rows[0]!.exists) {
    if (total === undefined) return undefined;
    await client.query(
      'create table bench_history_seed (end_ms bigint not null, total bigint not null, seeded bigint not null, rolled_up bigint not null)',
    );
    await client.query('insert into bench_history_seed values ($1, $2, 0, 0)', [Date.now() - DAY_MS, total]);
  }
  const { rows } = await client.query<Record<string, string>>('select * from bench_history_seed');
  const row = rows[0]!;
  return { endMs: Number(row.end_ms), total: Number(row.total), seeded: Number(row.seeded), rolledUp: Number(row.rolled_up) };
}

/**
 * Seeds rows [plan.seeded, to) of each table, spread evenly over `months` months up to plan.endMs: the same i, the same
 * time. A chunk of each table at a time, in one transaction with the plan's count. A call's request id is a UUID v7 of
 * its time, as the gateway's (src/http/middleware.ts): the calls a bench records later take their entries of the
 * index by request id after the seed's, where a gateway's do, not among them.
 */
export async function seed(
  client: pg.Client,
  tenant: BenchTenant,
  seats: Seat[],
  plan: SeedPlan,
  to: number,
  months: number,
): Promise<number> {
  const started = performance.now();
  const span = months * 30 * DAY_MS;
  const at = (i: number) => plan.endMs - span + Math.floor((i / plan.total) * span);
  // Each invocation's id, for its usage event: a chunk at a time (a Map holds at most 2^24 entries).
  const ids = new Map<number, string>();
  const idOf = (i: number) => {
    let id = ids.get(i);
    if (!id) ids.set(i, (id = uuidAt(at(i))));
    return id;
  };
  for (let chunk = plan.seeded; chunk < to; chunk += SEED_CHUNK) {
    const end = Math.min(to, chunk + SEED_CHUNK);
    await client.query('begin');
    await copyRows(
      client,
      'invocations',
      [
        'id',
        'workspace_id',
        'workspace_access_id',
        'provider_connection_id',
        'inference_key_id',
        'request_id',
        'method',
        'endpoint',
        'requested_model',
        'status',
        'metering_status',
        'quota_units',
        'started_at',
        'completed_at',
        'total_latency_ms',
        'attempt_id',
        'attempt_upstream_model',
        'attempt_status',
        'attempt_http_status',
        'attempt_started_at',
        'attempt_completed_at',
        'attempt_duration_ms',
      ],
      chunk,
      end,
      (i) => {
        const s = seats[i % seats.length]!;
        const t = new Date(at(i)).toISOString();
        const failed = i % 25 === 0;
        return `${idOf(i)}\t${tenant.workspaceId}\t${s.accessId}\t${tenant.connectionId}\t${s.keyId}\t${uuidAt(at(i))}\tPOST\tv1/chat/completions\tgpt-4o\t${failed ? 'UPSTREAM_ERROR' : 'SUCCEEDED'}\tmetered\t${failed ? 0 : 300}\t${t}\t${t}\t40\t${uuidAt(at(i))}\tgpt-4o\t${failed ? 'UPSTREAM_ERROR' : 'SUCCEEDED'}\t${failed ? 500 : 200}\t${t}\t${t}\t38\n`;
      },
    );
    await copyRows(client, 'usage_events', USAGE_EVENT_SEED_COLUMNS, chunk, end, (i) => {
      const s = seats[i % seats.length]!;
      return `${uuidAt(at(i))}\t${tenant.workspaceId}\t${s.accessId}\t${s.periodId}\t${idOf(i)}\tUSAGE\t300\t200\t0\t50\tgpt-4o\t${new Date(at(i)).toISOString()}\n`;
    });
    await client.query('update bench_history_seed set seeded = $1', [end]);
    await client.query('commit');
    plan.seeded = end;
    ids.clear();
  }
  return (performance.now() - started) / 1e3;
}

/** The tenant's seats: each access, a key of it and its current quota period. */
export async function seatsOf(client: pg.Client, tenant: BenchTenant): Promise<Seat[]> {
  return (
    await client.query<Seat>(
      `select a.id as "accessId", (select k.id from inference_keys k where k.workspace_access_id = a.id limit 1) as "keyId",
              (select q.id from quota_periods q where q.workspace_access_id = a.id order by period_start desc limit 1) as "periodId"
         from workspace_accesses a where a.workspace_id = $1`,
      [tenant.workspaceId],
    )
  ).rows;
}

/** The months the seed spans (the history job makes this month and the next ones; older ones exist where rows were). */
export async function seedMonths(client: pg.Client, months: number): Promise<void> {
  await client.query(
    `select nexus_history_month(t, m) from unnest(array['invocations', 'usage_events']) t,
            generate_series(now() - make_interval(months => $1 + 1), now(), interval '1 month') m`,
    [months],
  );
}

/** The workspace's rollups computed anew from its rows, every table analyzed (and noted in the seed's plan): seconds. */
export async function rebuildRollups(client: pg.Client, ws: string, plan?: SeedPlan): Promise<number> {
  const started = performance.now();
  for (const table of ROLLUP_TABLES) await client.query(`delete from ${table} where workspace_id = $1`, [ws]);
  // Analyzed before the rollups are computed from them: without their statistics the planner may choose a plan
  // that spills to disk for minutes (scripts/lib/usage-seed.ts).
  for (const table of ['invocations', 'usage_events']) await client.query(`analyze ${table}`);
  await client.query(rebuildWorkspaceRollupsSql('$1'), [ws]);
  for (const table of ['invocations', 'usage_events', ...ROLLUP_TABLES]) await client.query(`analyze ${table}`);
  if (plan) await client.query('update bench_history_seed set rolled_up = $1', [(plan.rolledUp = plan.seeded)]);
  return (performance.now() - started) / 1e3;
}

/**
 * A kept database's tables that every recorded call updates in place (the rollups, the leases, the periods) vacuumed
 * and analyzed, as autovacuum keeps them where a gateway runs: the versions of their rows that earlier runs' calls
 * left (where nothing vacuums, as on a cluster without autovacuum) would lengthen the HOT chains every arbiter check of
 * the record statement follows, and the fresh database it is compared with has none. Seconds.
 */
export async function vacuumUpdated(client: pg.Client): Promise<number> {
  const started = performance.now();
  await client.query(`vacuum (analyze) ${[...ROLLUP_TABLES, 'quota_leases', 'quota_periods'].join(', ')}`);
  return (performance.now() - started) / 1e3;
}
