/**
 * `npm run bench:upload`: what a large upload costs the gateway's memory. Nexus runs as its own process (src/server.ts
 * through tsx, on PostgreSQL in a schema of its own, dropped at the end) in front of the media fake upstream
 * (test/support/upstreams/media.ts, which reads an upload as it comes and holds none of it); this script sends it
 * BENCH_UPLOAD_MB (default 100) megabytes of WAV audio as a whisper-1 transcription, made as it is sent, twice,
 * and prints for each the Nexus process's resident memory (VmRSS, from /proc: Linux only) before it and its peak
 * while the upload went through (sampled every 10 ms), against the target: within 20 MB. Each call must be metered
 * (200, its charge read from the Admin API). An upload the gateway held whole would show as about its size, and
 * grow with it. What a first upload can add instead is the buffers of the request's and the spool's reads that V8
 * has not collected yet, which the process then keeps and reuses; the gateway collects them every 8 MiB read
 * (src/gateway/scavenge-pacer.ts). BENCH_NODE_OPTIONS passes node flags to the Nexus process.
 *
 * BENCH_UPLOAD_ROUNDS (default 1) runs that many fresh processes, and BENCH_UPLOAD_CHECKOUT=<dir> another checkout
 * of Nexus (its sources run through tsx: an export of an earlier commit, with this checkout's node_modules linked
 * in) alternately with this one, the other first in each round, so that both see the same host; a summary follows.
 * The exit code is 1 when this checkout missed the target.
 *
 *   BENCH_UPLOAD_MB=100 npm run bench:upload
 *   git archive HEAD~1 | tar -x -C ../before && ln -s "$PWD/node_modules" ../before/
 *   BENCH_UPLOAD_ROUNDS=3 BENCH_UPLOAD_CHECKOUT=../before npm run bench:upload
 *
 * DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres).
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { loadavg } from 'node:os';
import { basename, resolve } from 'node:path';
import pg from 'pg';
import { startNexusProcess } from './lib/nexus-process.js';
import { adminClient, provisionTenant } from '../test/support/tenant.js';
import { startMediaUpstream } from '../test/support/upstreams/media.js';
import { wavHeader } from '../test/support/wav.js';
import { getInvocation, listInvocations } from '../test/support/sdk.js';

const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const ROOT_KEY = 'nx-mgmt-bench-upload-0123456789abcdefghijklmnop';
const PROVIDER_KEY = 'sk-bench-upload-0123456789abcdef';
const MB = 1024 * 1024;
const SIZE = Number(process.env.BENCH_UPLOAD_MB ?? 100) * MB;
const TARGET_MB = 20;
/** Fresh processes per checkout, and another checkout measured alternately with this one (its first, then this one). */
const ROUNDS = Number(process.env.BENCH_UPLOAD_ROUNDS ?? 1);
const CHECKOUT = process.env.BENCH_UPLOAD_CHECKOUT;

/** A /proc/<pid>/status field, in bytes (VmRSS: resident now; VmHWM: the peak resident so far). */
function memoryOf(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!match) throw new Error(`no ${field} for process ${pid}`);
  return Number(match[1]) * 1024;
}

/** Sends a multipart transcription of SIZE bytes of audio, made 64 KiB at a time; resolves with the answer's status and request id. */
function sendUpload(url: string, apiKey: string): Promise<{ status: number; requestId: string; body: string }> {
  const boundary = `bench-${randomBytes(8).toString('hex')}`;
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="long.wav"\r\nContent-Type: audio/wav\r\n\r\n`,
  );
  const fields = Buffer.from(`\r\n--${boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper-1\r\n--${boundary}--\r\n`);
  const audio = SIZE - 44;
  const chunk = Buffer.alloc(64 * 1024, 3);
  return new Promise((resolve, reject) => {
    const req = request(`${url}/v1/audio/transcriptions`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${apiKey}`,
        'content-type': `multipart/form-data; boundary=${boundary}`,
        'content-length': String(head.length + SIZE + fields.length),
      },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode!, requestId: String(res.headers['x-nexus-request-id']), body }));
    });
    req.write(head);
    req.write(wavHeader(audio));
    let sent = 0;
    const more = () => {
      while (sent < audio) {
        const n = Math.min(chunk.length, audio - sent);
        sent += n;
        if (!req.write(n === chunk.length ? chunk : chunk.subarray(0, n))) return void req.once('drain', more);
      }
      req.end(fields);
    };
    more();
  });
}

/** What one Nexus process grew by: its first upload, then its second. */
interface Measured {
  label: string;
  grown: number[];
}

/** A fresh Nexus (this checkout, or `root`) in a schema of its own: a warm-up call, then two uploads, its RSS sampled. */
async function measure(root: string | undefined, up: Awaited<ReturnType<typeof startMediaUpstream>>): Promise<Measured> {
  const label = root ? `before (${basename(resolve(root))})` : 'this checkout';
  const schema = `bench_upload_${randomBytes(4).toString('hex')}`;
  const nexus = await startNexusProcess(
    {
      NODE_ENV: 'production',
      DATABASE_URL,
      NEXUS_DATABASE_SCHEMA: schema,
      NEXUS_MANAGEMENT_KEY: ROOT_KEY,
      NEXUS_ENCRYPTION_KEY: Buffer.alloc(32, 9).toString('base64'),
      NEXUS_ALLOW_PRIVATE_UPSTREAMS: 'true',
      NEXUS_LOG_LEVEL: 'warn',
      NEXUS_GATEWAY_BODY_LIMIT_BYTES: String(SIZE + MB),
      ...(process.env.BENCH_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_NODE_OPTIONS } : {}),
    },
    root ? { root: resolve(root) } : {},
  );
  const grown: number[] = [];
  try {
    const client = adminClient(nexus.url, ROOT_KEY);
    const tenant = await provisionTenant(client, { baseUrl: up.url, providerKey: PROVIDER_KEY, quotaUnits: 10_000_000_000n });
    const pid = nexus.child.pid!;
    // A small call first, so that what the first call loads is in the idle figure.
    const warm = await sendSmall(tenant.gatewayBaseUrl, tenant.apiKey);
    if (warm !== 200) throw new Error(`the warm-up call answered ${warm}`);
    await new Promise((r) => setTimeout(r, 500));
    console.log(
      `${label}, pid ${pid}, load average ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
    );
    for (const round of ['first', 'second']) {
      const idle = memoryOf(pid, 'VmRSS');
      let peak = idle;
      const sampler = setInterval(() => (peak = Math.max(peak, memoryOf(pid, 'VmRSS'))), 10);
      const started = Date.now();
      const answer = await sendUpload(tenant.gatewayBaseUrl, tenant.apiKey);
      clearInterval(sampler);
      const seconds = (Date.now() - started) / 1000;
      if (answer.status !== 200) throw new Error(`the upload answered ${answer.status}: ${answer.body}`);
      const seen = up.requests.at(-1)!;
      const invocation = await invocationOf(client, tenant.workspaceId, answer.requestId);
      grown.push(peak - idle);
      console.log(`  ${round} upload: ${mb(SIZE)} of WAV audio as a whisper-1 transcription, through in ${seconds.toFixed(1)} s`);
      console.log(
        `    upstream received ${mb(seen.bytes)} (its file ${mb(seen.files[0]?.size ?? 0)}); metered ${invocation.status}, ${invocation.quotaUnits} units`,
      );
      console.log(`    nexus RSS: before ${mb(idle)}, peak ${mb(peak)}, grown ${mb(peak - idle)}: ${verdict(peak - idle)}`);
      await new Promise((r) => setTimeout(r, 500));
    }
  } finally {
    await nexus.stop();
    const admin = new pg.Client({ connectionString: DATABASE_URL });
    await admin.connect();
    await admin.query(`drop schema if exists "${schema}" cascade`);
    await admin.end();
  }
  return { label, grown };
}

const mb = (n: number) => `${(n / MB).toFixed(1)} MB`;
const verdict = (grown: number) => `${grown <= TARGET_MB * MB ? 'within' : 'MORE than'} ${TARGET_MB} MB`;

async function main(): Promise<void> {
  const up = await startMediaUpstream({ apiKey: PROVIDER_KEY });
  const results: Measured[] = [];
  try {
    for (let round = 0; round < ROUNDS; round++)
      for (const root of CHECKOUT ? [CHECKOUT, undefined] : [undefined]) results.push(await measure(root, up));
  } finally {
    await up.close();
  }
  if (ROUNDS > 1 || CHECKOUT) {
    console.log(
      `\nsummary, load average now ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}:`,
    );
    for (const label of [...new Set(results.map((r) => r.label))]) {
      const mine = results.filter((r) => r.label === label);
      for (const [i, round] of ['first', 'second'].entries())
        console.log(`  ${label}, ${round} uploads grew RSS by: ${mine.map((r) => mb(r.grown[i]!)).join(', ')}`);
    }
  }
  // The target is this checkout's: a checkout measured beside it is only its comparison.
  if (results.some((r) => r.label === 'this checkout' && r.grown.some((g) => g > TARGET_MB * MB))) process.exitCode = 1;
}

/** A call's invocation, once its record is written (the recorder writes it after the answer). */
async function invocationOf(client: ReturnType<typeof adminClient>, workspaceId: string, requestId: string) {
  for (let tries = 0; tries < 100; tries++) {
    const list = await listInvocations({ client, path: { workspaceId }, query: { q: requestId } });
    const found = list.data?.[0];
    if (found) return (await getInvocation({ client, path: { invocationId: found.id } })).data!;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`no invocation of ${requestId}`);
}

/** A one-second transcription: the warm-up. */
async function sendSmall(url: string, apiKey: string): Promise<number> {
  const form = new FormData();
  form.append('model', 'whisper-1');
  const wav = Buffer.concat([wavHeader(32_000), Buffer.alloc(32_000)]);
  form.append('file', new Blob([wav], { type: 'audio/wav' }), 'short.wav');
  const res = await fetch(`${url}/v1/audio/transcriptions`, { method: 'POST', headers: { authorization: `Bearer ${apiKey}` }, body: form });
  await res.arrayBuffer();
  return res.status;
}

await main();
