/**
 * `npm run bench:batch`: what a batch of BENCH_BATCH_LINES (default 50,000) chat requests costs the gateway
 * (docs/batches.md). Nexus runs as its own process (src/server.ts through tsx, on PostgreSQL in a schema of its own,
 * dropped at the end) in front of the fake batch upstream (test/support/upstreams/batches.ts). The script
 *   1. uploads the input file as `POST v1/files` (purpose batch), its lines made as they are sent, and prints the Nexus
 *      process's resident memory (VmRSS, from /proc: Linux only) before it and its peak while the upload went through
 *      (sampled every 10 ms), against the target: within 30 MB;
 *   2. creates the batch, has the upstream complete it, and times how long the batch-settlement job takes to charge
 *      every request once the provider says it completed, against the target: under 60 s. That time includes the
 *      wait for the job's next poll (its round every 5 s, the batch's own poll at least 5 s apart), which is printed
 *      apart: the settlement proper is the rest.
 *
 *   BENCH_BATCH_LINES=50000 npm run bench:batch
 *
 * DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres).
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import pg from 'pg';
import { startNexusProcess } from './lib/nexus-process.js';
import { adminClient, provisionTenant } from '../test/support/tenant.js';
import { startBatchUpstream } from '../test/support/upstreams/batches.js';

const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const ROOT_KEY = 'nx-mgmt-bench-batch-0123456789abcdefghijklmnop';
const PROVIDER_KEY = 'sk-bench-batch-0123456789abcdef';
const MB = 1024 * 1024;
const LINES = Number(process.env.BENCH_BATCH_LINES ?? 50_000);
const RSS_TARGET_MB = 30;
const SETTLE_TARGET_S = 60;

/** A /proc/<pid>/status field, in bytes. */
function rssOf(pid: number): number {
  const match = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!match) throw new Error(`no VmRSS for process ${pid}`);
  return Number(match[1]) * 1024;
}

const lineOf = (i: number) =>
  JSON.stringify({
    custom_id: `req-${i}`,
    method: 'POST',
    url: '/v1/chat/completions',
    body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: `Summarize item ${i} of the nightly backfill.` }], max_tokens: 64 },
  }) + '\n';

/** POST v1/files, purpose batch, the file's lines made as they are sent (chunked: its length is not known ahead). */
function upload(url: string, apiKey: string): Promise<{ status: number; body: string; bytes: number }> {
  const boundary = `bench-${randomBytes(8).toString('hex')}`;
  const head = `--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="batch.jsonl"\r\nContent-Type: application/jsonl\r\n\r\n`;
  const tail = `\r\n--${boundary}--\r\n`;
  return new Promise((resolve, reject) => {
    const req = request(`${url}/v1/files`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': `multipart/form-data; boundary=${boundary}` },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode!, body, bytes }));
    });
    let bytes = 0;
    req.write(head);
    let i = 0;
    const more = () => {
      while (i < LINES) {
        let piece = '';
        for (let n = 0; n < 200 && i < LINES; n++) piece += lineOf(i++);
        bytes += Buffer.byteLength(piece);
        if (!req.write(piece)) return void req.once('drain', more);
      }
      req.end(tail);
    };
    more();
  });
}

async function post(url: string, apiKey: string, body: unknown): Promise<Record<string, any>> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${url} answered ${res.status}: ${text}`);
  return JSON.parse(text) as Record<string, any>;
}

async function main(): Promise<void> {
  const schema = `bench_batch_${randomBytes(4).toString('hex')}`;
  const up = await startBatchUpstream(PROVIDER_KEY);
  const nexus = await startNexusProcess({
    NODE_ENV: 'production',
    DATABASE_URL,
    NEXUS_DATABASE_SCHEMA: schema,
    NEXUS_MANAGEMENT_KEY: ROOT_KEY,
    NEXUS_ENCRYPTION_KEY: Buffer.alloc(32, 9).toString('base64'),
    NEXUS_ALLOW_PRIVATE_UPSTREAMS: 'true',
    NEXUS_LOG_LEVEL: 'warn',
  });
  const db = new pg.Client({ connectionString: DATABASE_URL });
  await db.connect();
  try {
    const client = adminClient(nexus.url, ROOT_KEY);
    const tenant = await provisionTenant(client, { baseUrl: up.url, providerKey: PROVIDER_KEY, quotaUnits: 10_000_000_000n });
    const pid = nexus.child.pid!;
    const mb = (n: number) => `${(n / MB).toFixed(1)} MB`;
    await new Promise((r) => setTimeout(r, 500));
    const idle = rssOf(pid);
    let peak = idle;
    const sampler = setInterval(() => (peak = Math.max(peak, rssOf(pid))), 10);
    const started = Date.now();
    const answer = await upload(tenant.gatewayBaseUrl, tenant.apiKey);
    clearInterval(sampler);
    if (answer.status !== 200) throw new Error(`the upload answered ${answer.status}: ${answer.body}`);
    const file = JSON.parse(answer.body) as { id: string };
    const grown = peak - idle;
    console.log(
      `upload: ${LINES} lines, ${mb(answer.bytes)} of JSONL, checked and through in ${((Date.now() - started) / 1000).toFixed(1)} s`,
    );
    console.log(
      `  nexus RSS: before ${mb(idle)}, peak ${mb(peak)}, grown ${mb(grown)}: ${grown <= RSS_TARGET_MB * MB ? 'within' : 'MORE than'} ${RSS_TARGET_MB} MB`,
    );

    const batch = await post(`${tenant.gatewayBaseUrl}/v1/batches`, tenant.apiKey, {
      input_file_id: file.id,
      endpoint: '/v1/chat/completions',
      completion_window: '24h',
    });
    up.run(batch.id as string);
    const completed = Date.now();
    const row = async () =>
      (await db.query(`select status, settled_requests, next_poll_at from "${schema}".batches where upstream_batch_id = $1`, [batch.id]))
        .rows[0] as {
        status: string;
        settled_requests: number;
      };
    // The first request charged marks the end of the wait for the poll; the batch SETTLED, the end of the settlement.
    let firstCharged: number | undefined;
    for (;;) {
      const now = await row();
      if (firstCharged === undefined && now.settled_requests > 0) firstCharged = Date.now();
      if (now.status === 'SETTLED') break;
      if (Date.now() - completed > 300_000) throw new Error('not settled in 5 minutes');
      await new Promise((r) => setTimeout(r, 50));
    }
    const settled = await row();
    const total = (Date.now() - completed) / 1000;
    const waited = ((firstCharged ?? Date.now()) - completed) / 1000;
    console.log(`settlement: ${settled.settled_requests} requests charged, ${total.toFixed(1)} s after the provider completed the batch`);
    console.log(
      `  of which ${waited.toFixed(1)} s waiting for the next poll, ${(total - waited).toFixed(1)} s reading and charging: ${total < SETTLE_TARGET_S ? 'under' : 'NOT under'} ${SETTLE_TARGET_S} s`,
    );
    if (grown > RSS_TARGET_MB * MB || total >= SETTLE_TARGET_S || settled.settled_requests !== LINES) process.exitCode = 1;
  } finally {
    await nexus.stop();
    await up.close();
    await db.query(`drop schema if exists "${schema}" cascade`);
    await db.end();
  }
}

await main();
