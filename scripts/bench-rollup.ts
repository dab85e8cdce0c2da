/**
 * `npm run bench:rollup`: what keeping usage_rollups and usage_key_rollups costs PostgreSQL per recorded call, two
 * ways, in one run:
 *   - batch: the gateway's record statement adds its calls and their events to the rollups itself, one upsert per
 *     rollup key per batch and table (src/domain/recording/rollup-sql.ts, the way Nexus keeps them);
 *   - trigger: the same statement without it, and a statement-level trigger on invocations that adds the same rows
 *     (the new invocations from its transition table, their events read back from usage_events by invocation id).
 *   - none: the same statement without it, and no trigger: the floor, what recording costs without any rollup.
 * A fresh database gets a workspace with BENCH_ROLLUP_USERS end users (default 8) on one plan and a price; each user
 * holds a quota lease. Each round records BENCH_ROLLUP_BATCHES batches (default 100) of BENCH_ROLLUP_CALLS calls
 * (default 20: answered and charged, with a few upstream errors and refusals, over 4 models) each way, the two ways
 * first in turn, through one connection; the CPU time of its backend (/proc/<pid>/stat, utime + stime) is read
 * before and after each way's batches. It prints µs of PostgreSQL CPU per call each way, per round and in total, the
 * ratio, and the host's load average. PostgreSQL must run on this host (its /proc). The tables first hold
 * BENCH_ROLLUP_SEEDED calls (default 200,000) of the past 30 days, analyzed, so that each statement is planned for
 * tables of a size a gateway writes to (a plan made for an empty table, kept by the session, would scan).
 *
 * DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres): the server the fresh database is made on; it is
 * dropped at the end. BENCH_ROLLUP_ROUNDS (default 6).
 */
import { cpus, loadavg } from 'node:os';
import pg from 'pg';
import { recordCallsSql } from '../src/domain/recording/record-sql.js';
import { recordValues } from '../src/records/call-repo.js';
import { ROLLED_EVENT_COLUMNS, rollUpCtes } from '../src/domain/recording/rollup-sql.js';
import type { CallRows } from '../src/records/call-rows.js';
import { withFreshNexus } from './lib/fresh-nexus.js';
import { cpuSecondsOf } from './lib/proc-cpu.js';
import { batchOf, MODELS, openLeases, pricedTenant } from './lib/record-batch.js';

const USERS = Number(process.env.BENCH_ROLLUP_USERS ?? 8);
const ROUNDS = Number(process.env.BENCH_ROLLUP_ROUNDS ?? 6);
const BATCHES = Number(process.env.BENCH_ROLLUP_BATCHES ?? 100);
const CALLS = Number(process.env.BENCH_ROLLUP_CALLS ?? 20);
const SEEDED = Number(process.env.BENCH_ROLLUP_SEEDED ?? 200_000);

type Way = 'batch' | 'trigger' | 'none';
const WAYS: Way[] = ['batch', 'trigger', 'none'];

await withFreshNexus(
  'rollup',
  async ({ url: serverUrl, databaseUrl, rootKey }) => {
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    try {
      const tenant = await pricedTenant(serverUrl, rootKey, 'bench-rollup', USERS);
      const leases = await openLeases(client, tenant, 'bench-rollup');
      // The calls of the past 30 days, each with its USAGE event, as a busy workspace's tables hold them.
      await client.query(
        `with c as (
         select gen_random_uuid() as id, gen_random_uuid() as usage_id, n,
                now() - (n::double precision / $2) * interval '30 days' as at
           from generate_series(1, $2) n
       ), i as (
         insert into invocations (id, workspace_id, workspace_access_id, provider_connection_id, inference_key_id, request_id,
                                  method, endpoint, requested_model, status, metering_status, quota_units, started_at, completed_at)
         select c.id, $1, a.id, $3, a.key_id, 'seed-' || c.n, 'POST', 'v1/chat/completions', 'gpt-4o', 'SUCCEEDED', 'metered', 300,
                c.at, c.at
           from c join lateral (select id, (select k.id from inference_keys k where k.workspace_access_id = wa.id limit 1) as key_id
                                  from workspace_accesses wa where wa.workspace_id = $1 offset c.n % $4 limit 1) a on true
       )
       insert into usage_events (id, workspace_id, workspace_access_id, quota_period_id, invocation_id, kind, units, input_tokens,
                                 cached_input_tokens, output_tokens, model, created_at)
       select c.usage_id, $1, qp.workspace_access_id, qp.id, c.id, 'USAGE', 300, 200, 0, 50, 'gpt-4o', c.at
         from c join lateral (select id, workspace_access_id from quota_periods where workspace_id = $1 offset c.n % $4 limit 1) qp on true`,
        [tenant.workspaceId, SEEDED, tenant.connectionId, USERS],
      );
      for (const table of ['invocations', 'usage_events', 'usage_rollups', 'usage_key_rollups', 'quota_leases', 'quota_periods'])
        await client.query(`vacuum analyze ${table}`);
      const planId = (
        (await client.query('select plan_id from workspace_accesses where id = $1', [tenant.accessId])).rows[0] as { plan_id: string }
      ).plan_id;
      await client.query(`
      create function bench_roll_up_calls() returns trigger language plpgsql as $$
      declare rows bigint;
      begin
        -- The calls' events, found by the index on their invocation id (the statement wrote them).
        with ev as (select e.* from new_calls c cross join lateral (
                       select ${ROLLED_EVENT_COLUMNS} from usage_events u where u.invocation_id = c.id) e),
        ${rollUpCtes('new_calls', 'ev')}
        select count(*) into rows from rolled_rows;
        return null;
      end $$`);
      await client.query(`
      create trigger bench_roll_up after insert on invocations
        referencing new table as new_calls for each statement execute function bench_roll_up_calls()`);

      const pid = ((await client.query('select pg_backend_pid() as pid')).rows[0] as { pid: number }).pid;
      try {
        cpuSecondsOf(pid);
      } catch {
        throw new Error(`no /proc/${pid}/stat: PostgreSQL must run on this host for its CPU to be read`);
      }
      const statements: Record<Way, string> = { batch: recordCallsSql(true), trigger: recordCallsSql(false), none: recordCallsSql(false) };
      /** The calls recorded without a rollup: not in it. */
      let unrolled = 0;
      const record = (way: Way, rows: CallRows[]) =>
        client.query({
          name: `bench_record_${way}`,
          text: statements[way],
          values: recordValues(rows),
        });

      async function measure(way: Way): Promise<number> {
        await client.query(`alter table invocations ${way === 'trigger' ? 'enable' : 'disable'} trigger bench_roll_up`);
        const batches = Array.from({ length: BATCHES }, () => batchOf(tenant, leases, planId, CALLS));
        // The statement is prepared (and its plan warm) before the clock starts.
        await record(way, batchOf(tenant, leases, planId, CALLS));
        if (way === 'none') unrolled += (BATCHES + 1) * CALLS;
        const before = cpuSecondsOf(pid);
        for (const rows of batches) await record(way, rows);
        return cpuSecondsOf(pid) - before;
      }

      console.log(
        `host: ${cpus().length} CPUs, load average ${loadavg()
          .map((l) => l.toFixed(1))
          .join(' ')} (1, 5, 15 min)`,
      );
      console.log(`${ROUNDS} rounds of ${BATCHES} batches of ${CALLS} calls each way, ${USERS} users, ${MODELS.length} models\n`);
      console.log(
        `${'round'.padEnd(6)} ${'batch µs/call'.padStart(14)} ${'trigger µs/call'.padStart(16)} ${'none µs/call'.padStart(13)} ${'batch/trigger'.padStart(14)}`,
      );
      const total: Record<Way, number> = { batch: 0, trigger: 0, none: 0 };
      const perCall = (seconds: number) => ((seconds * 1e6) / (BATCHES * CALLS)).toFixed(0);
      const line = (label: string, used: Record<Way, number>) =>
        `${label.padEnd(6)} ${perCall(used.batch).padStart(14)} ${perCall(used.trigger).padStart(16)} ${perCall(used.none).padStart(13)} ${(used.batch / used.trigger).toFixed(2).padStart(14)}`;
      for (let round = 1; round <= ROUNDS; round++) {
        // Each way first, second and third in turn.
        const order = WAYS.map((_, i) => WAYS[(i + round) % WAYS.length]!);
        const used: Record<Way, number> = { batch: 0, trigger: 0, none: 0 };
        for (const way of order) used[way] = await measure(way);
        for (const way of WAYS) total[way] += used[way];
        console.log(line(String(round), used));
      }
      console.log(line('all', { batch: total.batch / ROUNDS, trigger: total.trigger / ROUNDS, none: total.none / ROUNDS }));
      // Both ways that keep the rollup kept it exact: it counts every call recorded by them (not the seeded ones).
      const check = await client.query(
        `select (select sum(calls) from usage_rollups)::bigint as rolled, (select sum(calls) from usage_key_rollups)::bigint as by_key,
                (select count(*) from invocations)::bigint as calls`,
      );
      const c = check.rows[0] as { rolled: string; by_key: string; calls: string };
      console.log(
        `\nrollup: ${c.rolled} calls, by key: ${c.by_key}; invocations recorded with a rollup: ${Number(c.calls) - unrolled - SEEDED}`,
      );
      console.log(
        `host after: load average ${loadavg()
          .map((l) => l.toFixed(1))
          .join(' ')} (1, 5, 15 min)`,
      );
    } finally {
      await client.end();
    }
  },
  { NEXUS_ALLOW_PRIVATE_UPSTREAMS: 'true' },
);
