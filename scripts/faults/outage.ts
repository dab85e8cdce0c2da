/** `npm run faults`, scenario 2: PostgreSQL away under load; a draining process's spool; its replacement. */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { startTcpProxy } from '../lib/tcp-proxy.js';
import {
  DATABASE_URL,
  PG_CONTROL,
  accountOf,
  callOnce,
  dataRoot,
  nexus,
  period,
  produce,
  recorded,
  sleep,
  statusLine,
  tenant,
  until,
  type Answer,
  type Row,
} from './common.js';

// ---- 2. outage --------------------------------------------------------------------------------
export async function outageScenario(upstream: string): Promise<Row> {
  const url = new URL(DATABASE_URL);
  const proxy = PG_CONTROL ? undefined : await startTcpProxy({ host: url.hostname, port: Number(url.port || 5432) });
  const through = new URL(DATABASE_URL);
  if (proxy) through.port = String(proxy.port);
  const c = await nexus(through.toString());
  const t = await tenant(c, upstream, 100_000_000);
  const answers: { phase: 'before' | 'during' | 'after'; answer: Answer }[] = [];
  let phase: 'before' | 'during' | 'after' = 'before';
  let stop = false;
  const clients = Array.from({ length: 8 }, async () => {
    while (!stop) {
      const answer = await callOnce(t.gateway(c), t.apiKey, { headers: produce(10) });
      answers.push({ phase, answer });
      if (answer.status !== 200) await sleep(50);
    }
  });
  await sleep(3000);
  phase = 'during';
  if (proxy) {
    await proxy.cut();
    await sleep(10_000);
    await proxy.restore();
  } else {
    execFileSync('pg_ctlcluster', ['--skip-systemctl-redirect', clusterVersion(), 'main', 'stop', '-m', 'fast']);
    try {
      await sleep(10_000);
    } finally {
      execFileSync('pg_ctlcluster', ['--skip-systemctl-redirect', clusterVersion(), 'main', 'start']);
    }
  }
  phase = 'after';
  await sleep(5000);
  stop = true;
  await Promise.all(clients);
  const delivered = answers.filter((x) => x.answer.status === 200);
  await until(async () => (await recorded(t.accessId)).length >= delivered.length, 60_000);
  await until(async () => (await period(t.accessId)).reserved === 0n, 30_000);
  const account = await accountOf(
    t.accessId,
    delivered.map((x) => x.answer.requestId!),
  );
  await c.stop();
  await proxy?.close();
  const during = answers.filter((x) => x.phase === 'during').map((x) => x.answer);
  return {
    scenario: `outage: PostgreSQL away 10 s under load (${proxy ? 'connection cut by a proxy' : 'cluster stopped'})`,
    ...account,
    freedAfter: '-',
    statuses: `during: ${statusLine(during)}; all: ${statusLine(answers.map((x) => x.answer))}`,
  };
}

// ---- 2b. a draining process's spool -------------------------------------------------------------
/**
 * Processes G and H share one data dir and reach PostgreSQL through a proxy. G serves calls; the proxy
 * is cut; 3 s later G gets SIGTERM and drains into its spool file; PostgreSQL comes back 10 s after the
 * cut. H, running all along, writes G's spool: how long after PostgreSQL's return every call G delivered
 * is recorded (10 s wanted).
 */
export async function drainScenario(upstream: string): Promise<Row> {
  const url = new URL(DATABASE_URL);
  const proxy = await startTcpProxy({ host: url.hostname, port: Number(url.port || 5432) });
  const through = new URL(DATABASE_URL);
  through.port = String(proxy.port);
  const dir = mkdtempSync(join(dataRoot, 'shared-'));
  const g = await nexus(through.toString(), { NEXUS_DATA_DIR: dir });
  const h = await nexus(through.toString(), { NEXUS_DATA_DIR: dir });
  const t = await tenant(g, upstream, 100_000_000);
  const { answers, cutAt, files } = await drainedInOutage(proxy, g, t, dir);
  await sleep(Math.max(0, cutAt + 10_000 - Date.now()));
  await proxy.restore();
  const delivered = answers.filter((x) => x.status === 200);
  const written = await until(async () => {
    const ids = new Set((await recorded(t.accessId)).map((r) => r.request_id));
    return delivered.every((x) => ids.has(x.requestId!));
  }, 60_000);
  await until(async () => (await period(t.accessId)).reserved === 0n, 60_000);
  const account = await accountOf(
    t.accessId,
    delivered.map((x) => x.requestId!),
  );
  await h.stop();
  await proxy.close();
  return {
    scenario: 'drain: PostgreSQL away 10 s (proxy cut), SIGTERM after 3 s, its spool written by a live process on the data dir',
    ...account,
    freedAfter: '-',
    statuses:
      `${statusLine(answers)}; spool files left by the drain: ${files}; ` +
      `a draining process's spool written within ${written === null ? '>60' : (written / 1000).toFixed(1)} s of PostgreSQL's return`,
  };
}

/**
 * 8 clients call G for 2 s; the proxy to PostgreSQL is cut; 3 s later G gets SIGTERM and drains into its spool file
 * in `dir`. Resolves once G has exited, with every answer, when the cut came, and the spool files G left.
 */
async function drainedInOutage(
  proxy: { cut(): Promise<void> },
  g: Awaited<ReturnType<typeof nexus>>,
  t: Awaited<ReturnType<typeof tenant>>,
  dir: string,
): Promise<{ answers: Answer[]; cutAt: number; files: number }> {
  const answers: Answer[] = [];
  let stop = false;
  const clients = Array.from({ length: 8 }, async () => {
    while (!stop) {
      const answer = await callOnce(t.gateway(g), t.apiKey, { headers: produce(10) });
      answers.push(answer);
      if (answer.status !== 200) await sleep(50);
    }
  });
  await sleep(2000);
  await proxy.cut();
  const cutAt = Date.now();
  await sleep(3000);
  const stopped = g.stop();
  await sleep(500);
  stop = true;
  await Promise.all(clients);
  await stopped;
  const files = readdirSync(join(dir, 'spool')).length;
  return { answers, cutAt, files };
}

// ---- 2c. a drained process replaced during the outage ------------------------------------------
/**
 * G serves calls through a proxy to PostgreSQL; the proxy is cut; 3 s later G gets SIGTERM and drains into its
 * spool file; once it has exited, R starts on G's data dir, as a supervisor replacing G would, while PostgreSQL is
 * still away: R waits for it (/healthz 200, /readyz 503). PostgreSQL comes back 10 s after the cut: how long until
 * R is ready, and until every call G delivered is recorded.
 */
export async function replaceScenario(upstream: string): Promise<Row> {
  const url = new URL(DATABASE_URL);
  const proxy = await startTcpProxy({ host: url.hostname, port: Number(url.port || 5432) });
  const through = new URL(DATABASE_URL);
  through.port = String(proxy.port);
  const dir = mkdtempSync(join(dataRoot, 'replaced-'));
  const g = await nexus(through.toString(), { NEXUS_DATA_DIR: dir });
  const t = await tenant(g, upstream, 100_000_000);
  const { answers, cutAt, files } = await drainedInOutage(proxy, g, t, dir);
  const r = await nexus(through.toString(), { NEXUS_DATA_DIR: dir });
  const waiting = (await fetch(`${r.url}/readyz`)).status;
  await sleep(Math.max(0, cutAt + 10_000 - Date.now()));
  await proxy.restore();
  const back = Date.now();
  let readyMs: number | null = null;
  while (Date.now() - back < 60_000) {
    if (
      (await fetch(`${r.url}/readyz`).then(
        (res) => res.status,
        () => 0,
      )) === 200
    ) {
      readyMs = Date.now() - back;
      break;
    }
    await sleep(20);
  }
  const delivered = answers.filter((x) => x.status === 200);
  const written = await until(async () => {
    const ids = new Set((await recorded(t.accessId)).map((row) => row.request_id));
    return delivered.every((x) => ids.has(x.requestId!));
  }, 60_000);
  await until(async () => (await period(t.accessId)).reserved === 0n, 60_000);
  const account = await accountOf(
    t.accessId,
    delivered.map((x) => x.requestId!),
  );
  await r.stop();
  await proxy.close();
  const seconds = (ms: number | null) => (ms === null ? '>60' : (ms / 1000).toFixed(1));
  return {
    scenario: 'replace: PostgreSQL away 10 s (proxy cut), SIGTERM after 3 s, a replacement started on its data dir during the outage',
    ...account,
    freedAfter: '-',
    statuses:
      `${statusLine(answers)}; spool files left by the drain: ${files}; the replacement's /readyz during the outage: ${waiting}; ` +
      `ready ${seconds(readyMs)} s and the drained process's spool written within ${seconds(written === null ? null : written + (readyMs ?? 0))} s of PostgreSQL's return`,
  };
}

function clusterVersion(): string {
  return execFileSync('ls', ['/etc/postgresql'], { encoding: 'utf8' }).trim().split('\n')[0]!;
}
