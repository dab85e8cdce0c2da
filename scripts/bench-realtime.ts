/**
 * `npm run bench:realtime`: what Realtime sessions cost a Nexus process (docs/realtime.md).
 *
 * Nexus runs as its own process (src/server.ts through tsx) on a fresh database, its connection pointing at a Realtime
 * upstream served by this script (a ws server on 127.0.0.1).
 *
 * 1. Memory: BENCH_REALTIME_SESSIONS (default 200) sessions opened through the gateway and left idle; the process's
 *    resident memory (VmRSS) after them less before them, against a budget of 50 MB.
 * 2. Latency: BENCH_REALTIME_ROUNDS (default 10) rounds, each one turn read straight from the upstream and one turn
 *    read through Nexus, in alternating order. A turn is BENCH_REALTIME_FRAMES (default 200) audio delta frames of
 *    4 KiB, sent one at a time BENCH_REALTIME_GAP_MS (default 2) apart, as a voice model's audio arrives, each stamped
 *    with the time the upstream sent it. A round's figure is the p50 of its frames' transit through Nexus less the
 *    p50 straight from the upstream; the median of the rounds, with its interquartile range, is held to a budget of
 *    1 ms. Frames sent one at a time measure each frame's own transit: in a burst, a frame would also wait for the
 *    ones sent before it.
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
const FRAMES = Number(process.env.BENCH_REALTIME_FRAMES ?? 200);
const ROUNDS = Number(process.env.BENCH_REALTIME_ROUNDS ?? 10);
const GAP_MS = Number(process.env.BENCH_REALTIME_GAP_MS ?? 2);
const RSS_BUDGET_MB = 50;
const LATENCY_BUDGET_MS = 1;
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const ROOT_KEY = 'nx-mgmt-bench-root-0123456789abcdefghijklmnop';
const UPSTREAM_KEY = 'sk-bench-realtime-0123456789';
const AUDIO = randomBytes(3072).toString('base64');

/** The upstream: `session.created` on connect; a `response.create` answered with FRAMES stamped audio deltas, GAP_MS apart. */
async function startUpstream(): Promise<{ url: string; close(): void }> {
  const http = createServer();
  const wss = new WebSocketServer({ server: http });
  wss.on('connection', (ws) => {
    ws.send(JSON.stringify({ type: 'session.created', session: { id: 'sess_bench', max_output_tokens: 'inf' } }));
    ws.on('message', (data: Buffer) => {
      if (!data.toString('utf8').includes('"response.create"')) return;
      ws.send(JSON.stringify({ type: 'response.created', response: { id: 'resp_bench', status: 'in_progress' } }));
      let sent = 0;
      const next = () => {
        ws.send(
          `{"type":"response.output_audio.delta","response_id":"resp_bench","sent_ns":"${process.hrtime.bigint()}","delta":"${AUDIO}"}`,
        );
        if (++sent < FRAMES) setTimeout(next, GAP_MS);
        else ws.send(JSON.stringify({ type: 'response.done', response: { id: 'resp_bench', status: 'completed', usage: usage() } }));
      };
      next();
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

const loadAverage = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
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
  console.log(
    `${SESSIONS} idle sessions (load ${loadAverage()}): RSS ${before.toFixed(1)} MB -> ${after.toFixed(1)} MB, +${(after - before).toFixed(1)} MB`,
  );
  console.log(
    `  ${perSession.toFixed(0)} KB a session (both sockets); budget ${RSS_BUDGET_MB} MB: ${after - before <= RSS_BUDGET_MB ? 'ok' : 'OVER'}`,
  );
  for (const ws of open) ws.close();

  const directUrl = `${upstream.url.replace(/^http/, 'ws')}/v1/realtime?model=gpt-realtime`;
  const auth = { authorization: `Bearer ${tenant.apiKey}` };
  const p50 = async (url: string, headers: Record<string, string>) =>
    percentile(
      (await transits(url, headers)).sort((a, b) => a - b),
      50,
    );
  const rounds: { direct: number; through: number }[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    // Alternate which goes first, so that neither always follows the other.
    if (round % 2 === 0) {
      const direct = await p50(directUrl, {});
      rounds.push({ direct, through: await p50(sessionUrl(tenant), auth) });
    } else {
      const through = await p50(sessionUrl(tenant), auth);
      rounds.push({ direct: await p50(directUrl, {}), through });
    }
  }
  const median = (values: number[]) => {
    const sorted = [...values].sort((a, b) => a - b);
    return { p50: percentile(sorted, 50), p25: percentile(sorted, 25), p75: percentile(sorted, 75) };
  };
  const range = (m: { p50: number; p25: number; p75: number }) => `${m.p50.toFixed(3)} [${m.p25.toFixed(3)}, ${m.p75.toFixed(3)}]`;
  const added = median(rounds.map((r) => r.through - r.direct));
  console.log(`${ROUNDS} alternating rounds of ${FRAMES} audio frames of ${AUDIO.length} bytes, ${GAP_MS} ms apart; load ${loadAverage()}`);
  console.log(`  transit p50, median of rounds [IQR]: direct ${range(median(rounds.map((r) => r.direct)))} ms,`);
  console.log(`  through Nexus ${range(median(rounds.map((r) => r.through)))} ms`);
  console.log(`  Nexus adds ${range(added)} ms at p50; budget ${LATENCY_BUDGET_MS} ms: ${added.p50 <= LATENCY_BUDGET_MS ? 'ok' : 'OVER'}`);
} finally {
  await nexus.stop();
  upstream.close();
  await admin.query(`drop database if exists ${dbName} with (force)`);
  await admin.end();
}
