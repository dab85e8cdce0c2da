/**
 * `npm run bench:pg-parts`: what each statement the gateway sends costs PostgreSQL, one kind at a time, so that
 * `npm run bench`'s PostgreSQL CPU per call can be told apart. Through one connection of the gateway's kind (knex,
 * named statements, as src/records/call-repo.ts and src/gateway/auth-repo.ts send them), its backend's CPU read from
 * /proc before and after each part's statements:
 *   - the record statement (src/domain/recording/record-sql.ts) of batches of 1, 5, 20 and 50 calls, three ways: as
 *     Nexus sends it, without the day rollups, without any rollup; the fixed cost of a statement and the cost of each
 *     call in it come from the line through the batch sizes' figures (least squares); and each way with no call at
 *     all, which writes nothing and commits nothing: what the executor's set-up of its plan costs at every run;
 *   - a process's heartbeat over BENCH_PG_PARTS_USERS leases, no call under way (what a heartbeat or a snapshot costs
 *     beyond its calls' rows);
 *   - a lease's extension (quotaRepo.extendLease), as the gateway sends it (a named statement) and as it goes behind a
 *     transaction pooler (unnamed: planned at each run, as every extension was before it was named);
 *   - a lease's acquisition and its release (one of each, quotaRepo.acquireLease then releaseLease), the same two ways;
 *   - a rate allowance's grant and its give-back (rateRepo.take then giveBack: a request, 1,000 tokens and a slot of
 *     generous limits), the same two ways;
 *   - a key's lookup (the auth cache's, when an entry is renewed).
 * Each part is run BENCH_PG_PARTS_STATEMENTS times (default 200) per round, the parts in turn, each first in turn;
 * it prints the median of BENCH_PG_PARTS_ROUNDS rounds (default 5) with the interquartile range, µs of PostgreSQL CPU
 * per statement. A fresh database gets a workspace with BENCH_PG_PARTS_USERS end users (default 64, as `npm run
 * bench`), each holding a lease, and BENCH_PG_PARTS_SEEDED calls of the past 30 days (default 50,000), analyzed.
 * PostgreSQL must run on this host (its /proc). DATABASE_URL as bench:rollup.
 *
 * BENCH_PG_PARTS_BASE=<checkout> adds the record statement of another checkout of Nexus (its sources, its batches'
 * rows), as "base", in the same rounds on the same database, to compare a change of the statement with the build
 * before it. BENCH_PG_PARTS_ONLY=record times the record statements alone.
 */
import { cpus, loadavg } from 'node:os';
import { createDatabase, type Db } from '../src/db/database.js';
import { namedQuery } from '../src/db/named-query.js';
import { recordCallsSql } from '../src/domain/recording/record-sql.js';
import { createQuotaRepo } from '../src/domain/quota/quota-repo.js';
import { createRateRepo } from '../src/domain/rate-limits/rate-repo.js';
import { createAuthRepo } from '../src/gateway/auth-repo.js';
import { newId } from '../src/ids.js';
import { createCallRepo, recordValues } from '../src/records/call-repo.js';
import type { CallRows } from '../src/records/call-rows.js';
import { withFreshNexus } from './lib/fresh-nexus.js';
import { cpuNanosOf } from './lib/proc-cpu.js';
import { batchOf, openLeases, pricedTenant } from './lib/record-batch.js';

const USERS = Number(process.env.BENCH_PG_PARTS_USERS ?? 64);
const ROUNDS = Number(process.env.BENCH_PG_PARTS_ROUNDS ?? 5);
const STATEMENTS = Number(process.env.BENCH_PG_PARTS_STATEMENTS ?? 200);
const SEEDED = Number(process.env.BENCH_PG_PARTS_SEEDED ?? 50_000);
const SIZES = [1, 5, 20, 50];
const WAYS = { nexus: true, 'no day rollups': 'hours', 'no rollup': false } as const;
type Way = keyof typeof WAYS | 'base';
const BASE = process.env.BENCH_PG_PARTS_BASE;
const ONLY_RECORD = process.env.BENCH_PG_PARTS_ONLY === 'record';
/** BENCH_PG_PARTS_WAYS: the ways of the record statement timed (names of WAYS, comma-separated); default all. */
const TIMED_WAYS = (process.env.BENCH_PG_PARTS_WAYS?.split(',') ?? Object.keys(WAYS)) as (keyof typeof WAYS)[];

/** The record statement of the checkout at `dir` and its batches, as that checkout's gateway sends them. */
async function baseRecord(dir: string) {
  const sql = (await import(`${dir}/src/domain/recording/record-sql.ts`)) as typeof import('../src/domain/recording/record-sql.js');
  const batch = (await import(`${dir}/scripts/lib/record-batch.ts`)) as typeof import('./lib/record-batch.js');
  // Its statement's values as its gateway makes them: arrays of rows (recordValues), or, before those, of JSON objects.
  const repo = (await import(`${dir}/src/records/call-repo.ts`)) as Partial<typeof import('../src/records/call-repo.js')>;
  const { jsonArray } = (await import(`${dir}/src/db/row-json.ts`)) as typeof import('../src/db/row-json.js');
  const values =
    repo.recordValues ??
    ((rows: CallRows[]) => [jsonArray(rows.flatMap((r) => (r.leaseCall ? [r.leaseCall] : []))), jsonArray(rows.map((r) => r.invocation))]);
  return { text: sql.recordCallsSql(), batchOf: batch.batchOf, values };
}

const median = (xs: number[]) => quantile(xs, 0.5);
function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  const at = (s.length - 1) * q;
  const lo = Math.floor(at);
  return s[lo]! + (s[Math.min(lo + 1, s.length - 1)]! - s[lo]!) * (at - lo);
}
const mq = (xs: number[]) => `${median(xs).toFixed(0)} [${quantile(xs, 0.25).toFixed(0)}, ${quantile(xs, 0.75).toFixed(0)}]`;

/** The line through (batch size, µs per statement): its intercept (a statement's fixed cost) and slope (per call). */
function fit(points: [number, number][]): { fixed: number; perCall: number } {
  const n = points.length;
  const mx = points.reduce((s, [x]) => s + x, 0) / n;
  const my = points.reduce((s, [, y]) => s + y, 0) / n;
  const slope = points.reduce((s, [x, y]) => s + (x - mx) * (y - my), 0) / points.reduce((s, [x]) => s + (x - mx) ** 2, 0);
  return { fixed: my - slope * mx, perCall: slope };
}

/**
 * The lease and rate allowance statements of a call's path, each named and unnamed: statements on the users' leases
 * (`leases`, by access) and periods in turn.
 */
function pathParts(db: Db, workspaceId: string, leases: Map<string, string>, periods: { id: string; workspace_access_id: string }[]) {
  let turn = 0;
  const quota = createQuotaRepo(db, true);
  const quotaUnnamed = createQuotaRepo(db, false);
  const extend = (repo: typeof quota) => {
    const p = periods[turn++ % periods.length]!;
    const now = new Date();
    return repo.extendLease({
      leaseId: leases.get(p.workspace_access_id)!,
      accessId: p.workspace_access_id,
      periodId: p.id,
      need: 1n,
      want: 1n,
      share: 8,
      now,
      expiresAt: new Date(now.getTime() + 86_400_000),
    });
  };
  const acquireAndRelease = async (repo: typeof quota) => {
    const p = periods[turn++ % periods.length]!;
    const id = newId();
    const now = new Date();
    await repo.acquireLease({
      id,
      workspaceId,
      accessId: p.workspace_access_id,
      periodId: p.id,
      need: 1n,
      want: 1n,
      share: 8,
      requestId: 'bench-pg-parts',
      now,
      expiresAt: new Date(now.getTime() + 86_400_000),
    });
    await repo.releaseLease(id, now);
  };
  const rates = createRateRepo(db, true);
  const ratesUnnamed = createRateRepo(db, false);
  const takeAndGiveBack = async (repo: typeof rates) => {
    const p = periods[turn++ % periods.length]!;
    const id = newId();
    const nowMs = Date.now();
    const limits = { requests: 1_000_000, tokens: 100_000_000 };
    const asked = (need: number, limit: number) => ({ need, want: need, limit });
    const access = { id, accessId: p.workspace_access_id, nowMs };
    await repo.take({
      ...access,
      workspaceId,
      holdMs: 1000,
      requests: asked(1, limits.requests),
      tokens: asked(1000, limits.tokens),
      concurrent: asked(1, 1_000_000),
      share: 8,
      expiresAt: new Date(nowMs + 86_400_000),
    });
    await repo.giveBack({ ...access, requests: 1, tokens: 1000, concurrent: 1, limits });
  };
  return {
    'lease extension': () => extend(quota),
    'lease extension, unnamed': () => extend(quotaUnnamed),
    'lease acquisition and release (2 statements)': () => acquireAndRelease(quota),
    'lease acquisition and release (2 statements), unnamed': () => acquireAndRelease(quotaUnnamed),
    'rate grant and give-back (2 statements)': () => takeAndGiveBack(rates),
    'rate grant and give-back (2 statements), unnamed': () => takeAndGiveBack(ratesUnnamed),
  };
}

await withFreshNexus(
  'pg_parts',
  async ({ url: serverUrl, databaseUrl, rootKey }) => {
    const db = createDatabase({ databaseUrl, poolMax: 1 });
    try {
      const tenant = await pricedTenant(serverUrl, rootKey, 'bench-pg-parts', USERS);
      const client = (await db.client.acquireConnection()) as import('pg').Client;
      const pid = ((await client.query('select pg_backend_pid() as pid')).rows[0] as { pid: number }).pid;
      const leases = await openLeases(client, tenant, 'bench-pg-parts');
      // Calls of the past 30 days, each with its USAGE event, so the statements are planned for tables of some size.
      await client.query(
        `with c as (select gen_random_uuid() as id, n, now() - (n::double precision / $2) * interval '30 days' as at from generate_series(1, $2) n),
              i as (insert into invocations (id, workspace_id, workspace_access_id, provider_connection_id, inference_key_id, request_id,
                                             method, endpoint, requested_model, status, metering_status, quota_units, started_at, completed_at)
                    select c.id, $1, $3, $4, $5, 'seed-' || c.n, 'POST', 'v1/chat/completions', 'gpt-4o', 'SUCCEEDED', 'metered', 300, c.at, c.at
                      from c)
         insert into usage_events (id, workspace_id, workspace_access_id, quota_period_id, invocation_id, kind, units, input_tokens,
                                   cached_input_tokens, output_tokens, model, created_at)
         select gen_random_uuid(), $1, $3, (select id from quota_periods where workspace_access_id = $3 limit 1), c.id, 'USAGE', 300, 200, 0, 50, 'gpt-4o', c.at
           from c`,
        [tenant.workspaceId, SEEDED, tenant.accessId, tenant.connectionId, tenant.users[0]!.apiKeyId],
      );
      db.client.releaseConnection(client);
      await db.raw('analyze');
      const planId = (
        (await db.raw('select plan_id from workspace_accesses where id = ?', [tenant.accessId])).rows[0] as { plan_id: string }
      ).plan_id;
      const query = namedQuery(db);
      const statements = Object.fromEntries(Object.entries(WAYS).map(([way, rollUp]) => [way, recordCallsSql(rollUp)])) as Record<
        Way,
        string
      >;
      const record = (way: Exclude<Way, 'base'>, rows: CallRows[]) =>
        query(`bench_record_${way.replaceAll(' ', '_')}`, statements[way], recordValues(rows));
      const base = BASE ? await baseRecord(BASE) : undefined;
      const calls = createCallRepo(db);
      const auth = createAuthRepo(db);
      const leaseIds = [...leases.values()];
      const periods = (await db.raw('select id, workspace_access_id from quota_periods where workspace_id = ?', [tenant.workspaceId]))
        .rows as { id: string; workspace_access_id: string }[];
      const hashes = (await db.raw('select key_hash from inference_keys where workspace_id = ?', [tenant.workspaceId])).rows as {
        key_hash: string;
      }[];
      const path = pathParts(db, tenant.workspaceId, leases, periods);
      let turn = 0;
      const parts: Record<string, () => Promise<unknown>> = ONLY_RECORD
        ? {}
        : {
            heartbeat: () => calls.heartbeat(leaseIds, new Date(Date.now() + 86_400_000), [], new Date()),
            ...path,
            'key lookup': () => auth.lookup(hashes[turn++ % hashes.length]!.key_hash, tenant.connectionId, new Date()),
          };
      for (const way of TIMED_WAYS) {
        for (const n of SIZES) parts[`record ${way}, ${n}`] = () => record(way, batchOf(tenant, leases, planId, n));
        parts[`record ${way}, no call (its plan's set-up)`] = () => record(way, []);
      }
      if (base)
        for (const n of SIZES)
          parts[`record base, ${n}`] = () => {
            return query('bench_record_base', base.text, base.values(base.batchOf(tenant, leases, planId, n)));
          };

      console.log(
        `host: ${cpus().length} CPUs, load average ${loadavg()
          .map((l) => l.toFixed(1))
          .join(' ')} (1, 5, 15 min)`,
      );
      console.log(`${ROUNDS} rounds of ${STATEMENTS} statements a part, ${USERS} users, ${SEEDED} calls seeded\n`);
      const names = Object.keys(parts);
      const used = new Map<string, number[]>(names.map((name) => [name, []]));
      for (let round = 0; round < ROUNDS; round++) {
        const order = names.map((_, i) => names[(i + round) % names.length]!);
        for (const name of order) {
          // Prepared and warm before the clock starts (a named statement is planned at its first use on a connection).
          for (let i = 0; i < 6; i++) await parts[name]!();
          const before = cpuNanosOf(pid);
          for (let i = 0; i < STATEMENTS; i++) await parts[name]!();
          used.get(name)!.push((cpuNanosOf(pid) - before) / 1e3 / STATEMENTS);
        }
        process.stderr.write(`  round ${round + 1} done\n`);
      }
      console.log('| statement | PostgreSQL µs per statement | per call in it |');
      console.log('|---|---:|---:|');
      for (const name of names) {
        const n = /, (\d+)$/.exec(name)?.[1];
        const xs = used.get(name)!;
        console.log(`| ${name} | ${mq(xs)} | ${n ? mq(xs.map((x) => x / Number(n))) : ''} |`);
      }
      console.log('\n| record statement | fixed µs per statement | µs per call in it |');
      console.log('|---|---:|---:|');
      for (const way of [...TIMED_WAYS, ...(base ? ['base' as const] : [])]) {
        const lines = Array.from({ length: ROUNDS }, (_, r) => fit(SIZES.map((n) => [n, used.get(`record ${way}, ${n}`)![r]!])));
        console.log(`| ${way} | ${mq(lines.map((l) => l.fixed))} | ${mq(lines.map((l) => l.perCall))} |`);
      }
      console.log(
        `\nhost after: load average ${loadavg()
          .map((l) => l.toFixed(1))
          .join(' ')} (1, 5, 15 min)`,
      );
    } finally {
      await db.destroy();
    }
  },
  { NEXUS_ALLOW_PRIVATE_UPSTREAMS: 'true' },
);
