/**
 * `npm run bench:recorder`: what the recorder's group commit window saves PostgreSQL per recorded call, at a rate this
 * host can record whatever its load (no HTTP, no upstream: only the recorder and its statements). Calls as the
 * gateway's (scripts/lib/record-batch.ts: 64 end users, each on a held lease) are handed to a CallRecorder
 * (src/records/call-recorder.ts) at BENCH_RECORDER_RATE calls a second (default 800) for BENCH_RECORDER_SECONDS
 * (default 5), its record statements sent through one connection (the recorder sends one at a time), whose
 * backend's CPU is read from /proc before and after. Two windows in turn, each first in turn, BENCH_RECORDER_ROUNDS
 * rounds (default 10):
 *   - adaptive: 5 ms, a slice more while each brings calls, up to 25 ms or 50 calls (NEXUS_RECORD_WINDOW_MS=25);
 *   - 5 ms: a window of 5 ms whatever the rate (as it was before it adapted).
 * It prints, per way, the median [interquartile range] of PostgreSQL µs per call and of calls per statement, and the
 * rounds' ratio. PostgreSQL must run on this host (its /proc). DATABASE_URL as bench:rollup.
 */
import { cpus, loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { createDatabase } from '../src/db/database.js';
import { createCallRepo } from '../src/records/call-repo.js';
import { CallRecorder, type CallRecord } from '../src/records/call-recorder.js';
import type { Logger } from '../src/observability/logger.js';
import { adminClient, provisionTenant } from '../test/support/tenant.js';
import { withFreshNexus } from './lib/fresh-nexus.js';
import { cpuNanosOf } from './lib/proc-cpu.js';
import { batchOf, openLeases } from './lib/record-batch.js';

const RATE = Number(process.env.BENCH_RECORDER_RATE ?? 800);
const SECONDS = Number(process.env.BENCH_RECORDER_SECONDS ?? 5);
const ROUNDS = Number(process.env.BENCH_RECORDER_ROUNDS ?? 10);
const USERS = 64;
const WAYS = { adaptive: { maxMs: 25 }, '5 ms': { maxMs: 5, flushAt: 200 } } as const;
type Way = keyof typeof WAYS;

const quiet = { info() {}, warn() {}, error() {}, debug() {} } as unknown as Logger;
function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  const at = (s.length - 1) * q;
  const lo = Math.floor(at);
  return s[lo]! + (s[Math.min(lo + 1, s.length - 1)]! - s[lo]!) * (at - lo);
}
const mq = (xs: number[], d = 0) => `${quantile(xs, 0.5).toFixed(d)} [${quantile(xs, 0.25).toFixed(d)}, ${quantile(xs, 0.75).toFixed(d)}]`;
const load = () =>
  loadavg()
    .map((l) => l.toFixed(1))
    .join(' ');

await withFreshNexus(
  'recorder',
  async ({ url: serverUrl, databaseUrl, rootKey }) => {
    const db = createDatabase({ databaseUrl, poolMax: 1 });
    try {
      const tenant = await provisionTenant(adminClient(serverUrl, rootKey), {
        name: 'bench-recorder',
        baseUrl: 'http://127.0.0.1:9',
        providerKey: 'sk-bench-recorder-0123456789',
        users: USERS,
        quotaUnits: 1_000_000_000_000n,
      });
      const client = (await db.client.acquireConnection()) as import('pg').Client;
      const pid = ((await client.query('select pg_backend_pid() as pid')).rows[0] as { pid: number }).pid;
      const leases = await openLeases(client, tenant, 'bench-recorder');
      db.client.releaseConnection(client);
      const planId = (
        (await db.raw('select plan_id from workspace_accesses where id = ?', [tenant.accessId])).rows[0] as { plan_id: string }
      ).plan_id;
      const repo = createCallRepo(db);

      async function run(way: Way): Promise<{ perCall: number; perStatement: number }> {
        let statements = 0;
        const recorder = new CallRecorder({
          repo: { record: async (rows) => void (await repo.record(rows)) },
          keys: { touchLastRequest: async () => true },
          logger: quiet,
          written: () => {},
          events: { batch: () => void statements++, failure() {}, spooled() {}, logsWritten() {}, logsDropped() {} },
          window: WAYS[way],
        });
        const total = RATE * SECONDS;
        // The calls made before the clock starts; handed to the recorder at the rate, in ticks of 1 ms.
        const calls: CallRecord[] = batchOf(tenant, leases, planId, total).map((rows) => ({
          ...rows,
          requestId: rows.id,
          keyId: 'bench',
          lastRequestAt: new Date(),
          admission: undefined,
          span: undefined,
        }));
        const before = cpuNanosOf(pid);
        const start = performance.now();
        let handed = 0;
        while (handed < total) {
          const due = Math.min(total, Math.floor(((performance.now() - start) * RATE) / 1000));
          for (; handed < due; handed++) recorder.record(calls[handed]!, new Date());
          await sleep(1);
        }
        await recorder.drain();
        recorder.close();
        return { perCall: (cpuNanosOf(pid) - before) / 1e3 / total, perStatement: total / statements };
      }

      console.log(`host: ${cpus().length} CPUs, load average ${load()} (1, 5, 15 min)`);
      console.log(`${ROUNDS} rounds, ${RATE} calls/s for ${SECONDS} s each way, ${USERS} users\n`);
      await run('adaptive');
      const got: Record<Way, { perCall: number; perStatement: number }[]> = { adaptive: [], '5 ms': [] };
      const ratios: number[] = [];
      const ways = Object.keys(WAYS) as Way[];
      for (let round = 0; round < ROUNDS; round++) {
        const order = round % 2 ? [...ways].reverse() : ways;
        const r = {} as Record<Way, { perCall: number; perStatement: number }>;
        for (const way of order) r[way] = await run(way);
        for (const way of ways) got[way].push(r[way]);
        ratios.push(r.adaptive.perCall / r['5 ms'].perCall);
        process.stderr.write(`  round ${round + 1}: ${ways.map((w) => `${w} ${r[w].perCall.toFixed(0)} µs/call`).join(', ')}\n`);
      }
      console.log('| window | PostgreSQL µs per call | calls per statement |');
      console.log('|---|---:|---:|');
      for (const way of ways)
        console.log(
          `| ${way} | ${mq(got[way].map((g) => g.perCall))} | ${mq(
            got[way].map((g) => g.perStatement),
            1,
          )} |`,
        );
      console.log(
        `\nadaptive / 5 ms, the rounds' ratios: ${mq(
          ratios.map((x) => x * 100),
          1,
        )} %`,
      );
      console.log(`host after: load average ${load()} (1, 5, 15 min)`);
    } finally {
      await db.destroy();
    }
  },
  { NEXUS_ALLOW_PRIVATE_UPSTREAMS: 'true' },
);
