/**
 * `npm run faults`: what Nexus keeps when production bites. It starts
 * PostgreSQL-backed Nexus processes (a fresh schema of DATABASE_URL, default
 * postgres://postgres@127.0.0.1:5432/postgres, dropped at the end) and an
 * upstream of its own, then runs four scenarios and prints one table:
 *
 *   1. kill      SIGKILL a process at a random moment while streams start
 *                through it, one every 50 ms (some within their first second);
 *                another process reclaims its lease; a new process starts. Three
 *                rounds (FAULTS_KILL_ROUNDS). Reports the calls delivered but
 *                never charged, and how many of them were younger than the
 *                snapshot's 500 ms window at the kill.
 *   2. outage    PostgreSQL away for about 10 s under load: through a TCP proxy
 *                the script cuts, or, with FAULTS_PG_CONTROL=1, the local cluster
 *                itself stopped and started (pg_ctlcluster).
 *      drain     PostgreSQL away 10 s (a proxy cut); a process gets SIGTERM 3 s
 *                into it and leaves its spool; how soon another process on the
 *                same data dir writes it once PostgreSQL is back.
 *      replace   the same drain, its replacement started on its data dir during
 *                the outage: how soon after PostgreSQL's return the replacement
 *                is ready, and has written the drained process's spool.
 *   3. two       two processes under concurrent load against a small quota.
 *   4. runaway   an upstream that ignores max_tokens (500 tokens for 20), streamed
 *                and JSON, against a small quota; then 200 JSON calls (2000 tokens
 *                for 20) in 10 waves of 20, each wave after the previous one ended:
 *                the overspend of all the waves against the first wave's.
 *   7. first-wave 2,000 JSON calls, 200 at a time over 2 processes, on a quota of 100,000, answered
 *                with 2,000 output tokens for max_tokens 20, for an OpenAI and an Anthropic
 *                connection and a model no process has seen yet: what the period consumed past
 *                its grant, and the units charged beyond the calls' admitted bounds (the first
 *                wave is admitted before any answer has taught the learned bound); then again
 *                with NEXUS_FIRST_WAVE_CALLS=10000, the first wave unbounded.
 *   6. route     a route over two targets (the same fake upstream, one of them through a TCP proxy),
 *                loadbalanced under load; the proxied one is cut for 10 s and restored: the calls
 *                that failed (none expected: the other target answers), the charges, and how soon
 *                after the restore its breaker closed again (docs/routes.md).
 *   5. changes   an access suspended and activated on one process while another
 *                serves its calls with a 5 s auth cache: how soon the other applies
 *                each change (LISTEN/NOTIFY), printed as a second table.
 *
 * Columns: calls the clients got an answer from (delivered), those of them
 * recorded, and lost (delivered and not recorded; for kill, delivered and never charged); units charged and units the charge rule
 * expects for what was delivered; overspend (consumed beyond granted); units
 * left reserved once it settled, and how long a dead process's units stayed
 * held; the statuses the clients saw. Like the bench it reports and asserts
 * nothing; the regular suite tests each rule (test/reliability).
 *
 *   FAULTS_ONLY='kill;outage' npm run faults     only those scenarios
 *   NEXUS_LEASE_TTL_MS=10000               the lease TTL the processes run with (default theirs)
 */
import { rmSync } from 'node:fs';
import { startAnthropicUpstream } from '../test/support/upstreams/anthropic.js';
import { startOpenAiUpstream } from '../test/support/upstreams/openai.js';
import pg from 'pg';
import { changesScenario } from './faults/changes.js';
import { DATABASE_URL, dataRoot, db, ONLY, PG_CONTROL, PROVIDER_KEY, running, SCHEMA, type Row } from './faults/common.js';
import { killScenario } from './faults/kill.js';
import { drainScenario, outageScenario, replaceScenario } from './faults/outage.js';
import { firstWaveScenario, runawayScenario, twoScenario } from './faults/quota.js';
import { routeScenario } from './faults/route.js';

// ---- the run --------------------------------------------------------------------------------------
async function main(): Promise<void> {
  const admin = new pg.Client({ connectionString: DATABASE_URL });
  await admin.connect();
  await admin.query(`create schema ${SCHEMA}`);
  await admin.end();
  const upstream = await startOpenAiUpstream({ apiKey: PROVIDER_KEY });
  const anthropicUpstream = await startAnthropicUpstream({ apiKey: PROVIDER_KEY });
  const rows: Row[] = [];
  let changes: string | undefined;
  const wanted = (name: string) => !ONLY || ONLY.includes(name);
  try {
    if (wanted('kill')) rows.push(await killScenario(upstream.url));
    if (wanted('outage')) rows.push(await outageScenario(upstream.url));
    if (wanted('drain')) rows.push(await drainScenario(upstream.url));
    if (wanted('replace')) rows.push(await replaceScenario(upstream.url));
    if (wanted('two')) rows.push(await twoScenario(upstream.url));
    if (wanted('runaway')) rows.push(...(await runawayScenario(upstream.url)));
    if (wanted('route')) rows.push(await routeScenario(upstream.url));
    if (wanted('first-wave')) {
      rows.push(await firstWaveScenario('openai', upstream.url));
      rows.push(await firstWaveScenario('anthropic', anthropicUpstream.url));
      rows.push(await firstWaveScenario('openai', upstream.url, true));
      rows.push(await firstWaveScenario('anthropic', anthropicUpstream.url, true));
    }
    if (wanted('changes')) changes = await changesScenario(upstream.url);
  } finally {
    for (const p of running) await p.kill();
    await upstream.close();
    await anthropicUpstream.close();
    await db.query(`drop schema if exists ${SCHEMA} cascade`).catch(() => {});
    await db.end();
    rmSync(dataRoot, { recursive: true, force: true });
  }
  console.log(
    `\nFault campaign (${new Date().toISOString()}; PostgreSQL at ${new URL(DATABASE_URL).host}; FAULTS_PG_CONTROL=${PG_CONTROL ? 1 : 0})`,
  );
  if (rows.length) {
    console.log(
      '| scenario | delivered | recorded | lost | units charged | units expected | overspend | reserved left | dead units freed after | statuses |',
    );
    console.log('|---|---:|---:|---:|---:|---|---:|---:|---:|---|');
  }
  for (const r of rows) {
    console.log(
      `| ${r.scenario} | ${r.delivered} | ${r.recorded} | ${r.lost} | ${r.charged} | ${r.expected} | ${r.overspend} | ${r.reservedLeft} | ${r.freedAfter} | ${r.statuses} |`,
    );
  }
  if (changes) {
    console.log(
      '\nChanges on one process, applied by another (auth cache TTL 5 s; ms after the Admin API answered, between the start of the last call that did not show it and the first that did)',
    );
    console.log(
      '| changes | seen by the next call on the same process | other process p50 ms | p90 ms | max ms | one gateway call, p50 ms |',
    );
    console.log('|---|---:|---:|---:|---:|---:|');
    console.log(changes);
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
