/**
 * `npm run bench:realtime`: what Realtime sessions cost a Nexus process (docs/realtime.md).
 *
 * Nexus runs as its own process (src/server.ts through tsx) on a fresh database, its connection pointing at a Realtime
 * upstream served by this script (a ws server on 127.0.0.1).
 *
 * 1. Memory: BENCH_REALTIME_SESSIONS (default 200) sessions opened through the gateway and left idle; the process's
 *    resident memory (VmRSS) after them less before them, against a budget of 50 MB.
 * 2. Latency: BENCH_REALTIME_FRAMES (default 2,000) audio delta frames of 4 KiB, each stamped with the time the
 *    upstream sent it, read by one client straight from the upstream and then through Nexus; the p50 of each
 *    frame's transit, and what Nexus adds at p50, against a budget of 1 ms.
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import WebSocket, { WebSocketServer } from 'ws';
import { adminClient, provisionTenant, type Tenant } from '../test/support/tenant.js';
import { listenLocal } from '../test/support/local-server.js';
import { freshNexusEnv, percentile } from './lib/fresh-nexus.js';
import { startNexusProcess } from './lib/nexus-process.js';

const SESSIONS = Number(process.env.BENCH_REALTIME_SESSIONS ?? 200);
const FRAMES = Number(process.env.BENCH_REALTIME_FRAMES ?? 2000);
const RSS_BUDGET_MB = 50;
const LATENCY_BUDGET_MS = 1;
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const ROOT_KEY = 'nx-mgmt-bench-root-0123456789abcdefghijklmnop';
const UPSTREAM_KEY = 'sk-bench-realtime-0123456789';
const AUDIO = randomBytes(3072).toString('base64');

/** The upstream: `session.created` on connect; a `response.create` answered with FRAMES stamped audio deltas. */
async function startUpstream(): Promise<{ url: string; close(): void }> {
  const http = createServer();
  const wss = new WebSocketServer({ server: http });
  wss.on('connection', (ws) => {
    ws.send(JSON.stringify({ type: 'session.created', session: { id: 'sess_bench', max_output_tokens: 'inf' } }));
    ws.on('message', (data: Buffer) => {
      if (!data.toString('utf8').includes('"response.create"')) return;
      ws.send(JSON.stringify({ type: 'response.created', response: { id: 'resp_bench', status: 'in_progress' } }));
      let sent = 0;
      const burst = () => {
        for (let i = 0; i < 20 && sent < FRAMES; i++, sent++) {
          ws.send(
            `{"type":"response.output_audio.delta","response_id":"resp_bench","sent_ns":"${process.hrtime.bigint()}","delta":"${AUDIO}"}`,
          );
        }
        if (sent < FRAMES) setTimeout(burst, 1);
        else ws.send(JSON.stringify({ type: 'response.done', response: { id: 'resp_bench', status: 'completed', usage: usage() } }));
      };
      burst();
    });
  });
  const url = await listenLocal(http);
  return { url, close: () => (wss.close(), http.close()) };
}

const usage = () => ({
  input_tokens: 10,
  output_tokens: FRAMES,
  input_token_details: { cached_tokens: 0, audio_tokens: 10 },
  output_token_details: { audio_tokens: FRAMES },
});

/** One turn's frames on `url`, each frame's transit in ms (sent by the upstream to read by the client). */
function transits(url: string, headers: Record<string, string>): Promise<number[]> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, ['realtime'], { headers });
    const ms: number[] = [];
    ws.on('message', (data: Buffer) => {
      const now = process.hrtime.bigint();
      const text = data.toString('utf8');
      const at = text.indexOf('"sent_ns":"');
      if (at >= 0) ms.push(Number(now - BigInt(text.slice(at + 11, text.indexOf('"', at + 11)))) / 1e6);
      else if (text.includes('"session.created"')) ws.send(JSON.stringify({ type: 'response.create' }));
      else if (text.includes('"response.done"')) {
        ws.close();
        resolve(ms);
      }
    });
    ws.on('error', reject);
  });
}

const rssMb = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;
const sessionUrl = (tenant: Tenant) => `${tenant.gatewayBaseUrl.replace(/^http/, 'ws')}/v1/realtime?model=gpt-realtime`;

function openSession(tenant: Tenant): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(sessionUrl(tenant), ['realtime'], { headers: { authorization: `Bearer ${tenant.apiKey}` } });
    ws.once('message', () => resolve(ws));
    ws.once('error', reject);
  });
}

const dbName = `nexus_bench_realtime_${randomBytes(4).toString('hex')}`;
const admin = new pg.Client({ connectionString: DATABASE_URL });
await admin.connect();
await admin.query(`create database ${dbName}`);
const databaseUrl = new URL(DATABASE_URL);
databaseUrl.pathname = `/${dbName}`;
const upstream = await startUpstream();
const nexus = await startNexusProcess({
  ...freshNexusEnv(databaseUrl.toString()),
  NEXUS_MANAGEMENT_KEY: ROOT_KEY,
  NEXUS_ALLOW_PRIVATE_UPSTREAMS: 'true',
  NEXUS_REALTIME_SESSIONS_PER_ACCESS: String(SESSIONS + 10),
});
try {
  const tenant = await provisionTenant(adminClient(nexus.url, ROOT_KEY), {
    baseUrl: upstream.url,
    providerKey: UPSTREAM_KEY,
    quotaUnits: 1_000_000_000n,
    maxOutputTokens: FRAMES * 2,
  });
  // Warm: a session and a turn through the gateway (its modules loaded, its pools made).
  await transits(sessionUrl(tenant), { authorization: `Bearer ${tenant.apiKey}` });
  const before = rssMb(nexus.child.pid!);
  const open: WebSocket[] = [];
  for (let i = 0; i < SESSIONS; i++) open.push(await openSession(tenant));
  await new Promise((r) => setTimeout(r, 2000));
  const after = rssMb(nexus.child.pid!);
  const perSession = ((after - before) * 1024) / SESSIONS;
  console.log(`${SESSIONS} idle sessions: RSS ${before.toFixed(1)} MB -> ${after.toFixed(1)} MB, +${(after - before).toFixed(1)} MB`);
  console.log(
    `  ${perSession.toFixed(0)} KB a session (both sockets); budget ${RSS_BUDGET_MB} MB: ${after - before <= RSS_BUDGET_MB ? 'ok' : 'OVER'}`,
  );
  for (const ws of open) ws.close();

  const direct = (await transits(`${upstream.url.replace(/^http/, 'ws')}/v1/realtime?model=gpt-realtime`, {})).sort((a, b) => a - b);
  const through = (await transits(sessionUrl(tenant), { authorization: `Bearer ${tenant.apiKey}` })).sort((a, b) => a - b);
  const added = percentile(through, 50) - percentile(direct, 50);
  console.log(`${FRAMES} audio frames of ${AUDIO.length} bytes: transit p50 direct ${percentile(direct, 50).toFixed(3)} ms,`);
  console.log(`  through Nexus ${percentile(through, 50).toFixed(3)} ms (p99 ${percentile(through, 99).toFixed(3)} ms)`);
  console.log(`  Nexus adds ${added.toFixed(3)} ms at p50; budget ${LATENCY_BUDGET_MS} ms: ${added <= LATENCY_BUDGET_MS ? 'ok' : 'OVER'}`);
} finally {
  await nexus.stop();
  upstream.close();
  await admin.query(`drop database if exists ${dbName} with (force)`);
  await admin.end();
}
