/**
 * What the Realtime tests (OpenAI's and Gemini Live's) share: a raw ws client's session, a refused handshake, the turns
 * and the own record of a session, a fallback route behind a dead target, the relay's limits, and the units of a usage
 * at a test tenant's default prices.
 */
import WebSocket from 'ws';
import { createProviderConnection, createRoute, getInvocation } from '../support/sdk.js';
import type { TestApp } from '../support/test-app.js';
import type { TenantSpec } from '../support/tenant.js';
import type { RealtimeUsage } from '../support/upstreams/realtime.js';
import { until, type Tenant } from './gateway-support.js';

const MODEL = 'gpt-realtime';

/**
 * Units of a usage at the tenant's default prices: text in 1, cached 0.5, text out 2 a token; uncached audio in 3 and
 * audio out 5 with `kinds` (the tests' audio multipliers), else audio as text.
 */
export function unitsOf(u: RealtimeUsage, kinds = false): bigint {
  const cached = BigInt(u.cached ?? 0);
  const audioIn = BigInt((u.audioIn ?? 0) - (u.cachedAudio ?? 0));
  const audioOut = BigInt(u.audioOut ?? 0);
  const ppm =
    (BigInt(u.input) - cached - audioIn) * 1_000_000n +
    cached * 500_000n +
    audioIn * (kinds ? 3_000_000n : 1_000_000n) +
    (BigInt(u.output) - audioOut) * 2_000_000n +
    audioOut * (kinds ? 5_000_000n : 2_000_000n);
  return (ppm + 999_999n) / 1_000_000n;
}

/** The relay's limits the session tests run under: two sessions an access, 64 KiB frames, and `idleMs` of silence. */
export const relayLimits = (idleMs: number) => ({
  NEXUS_REALTIME_SESSIONS_PER_ACCESS: '2',
  NEXUS_REALTIME_MAX_FRAME_BYTES: '65536',
  NEXUS_REALTIME_IDLE_TIMEOUT_MS: String(idleMs),
});

export const wsUrl = (tenant: Tenant, path = `v1/realtime?model=${MODEL}`) => `${tenant.gatewayBaseUrl.replace(/^http/, 'ws')}/${path}`;

/** A raw ws client's session: its events as they come, and a wait for the next of a type. */
export interface RawSession {
  ws: WebSocket;
  requestId: string;
  events: { type: string; [k: string]: unknown }[];
  next(type: string, after?: number): Promise<{ type: string; [k: string]: unknown }>;
  closed: Promise<{ code: number; reason: string }>;
  send(event: Record<string, unknown>): void;
}

export function openRaw(
  tenant: Tenant,
  how: 'bearer' | 'subprotocol' = 'bearer',
  options: WebSocket.ClientOptions = {},
  url = wsUrl(tenant),
): Promise<RawSession> {
  const protocols = how === 'subprotocol' ? ['realtime', `openai-insecure-api-key.${tenant.apiKey}`] : ['realtime'];
  const headers: Record<string, string> = how === 'bearer' ? { authorization: `Bearer ${tenant.apiKey}` } : {};
  const ws = new WebSocket(url, protocols, { headers, ...options });
  const events: RawSession['events'] = [];
  ws.on('message', (data: Buffer) => events.push(JSON.parse(data.toString('utf8')) as RawSession['events'][number]));
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on('close', (code, reason) => resolve({ code, reason: String(reason) })),
  );
  return new Promise((resolve, reject) => {
    let requestId = '';
    ws.once('upgrade', (res) => (requestId = String(res.headers['x-nexus-request-id'])));
    ws.once('unexpected-response', (_req, res) => reject(new Error(`handshake answered ${res.statusCode}`)));
    ws.once('error', reject);
    ws.once('open', () =>
      resolve({
        ws,
        requestId,
        events,
        closed,
        send: (event) => ws.send(JSON.stringify(event)),
        async next(type, after = 0) {
          let found: RawSession['events'][number] | undefined;
          await until(async () => Boolean((found = events.slice(after).find((e) => e.type === type))));
          return found!;
        },
      }),
    );
  });
}

/** The turns recorded for a session (its request id, its own invocation's id), oldest first, with their usage events. */
export async function turnsOfSession(t: TestApp, requestId: string) {
  await t.nexus.gateway.drain();
  const rows = await t.database.db('invocations').where({ session_id: requestId }).orderBy('started_at');
  return Promise.all(
    rows.map(async (row) => {
      const usage = await t.database.db('usage_events').where({ invocation_id: row.id, kind: 'USAGE' }).first();
      return { ...row, quota_units: BigInt(row.quota_units), usage };
    }),
  );
}

/** A session's own invocation, through the Admin API, once it is recorded (when the session has closed). */
export async function sessionRecord(t: TestApp, requestId: string) {
  await until(async () => {
    await t.nexus.gateway.drain();
    return (await getInvocation({ client: t.client, path: { invocationId: requestId } })).response.status === 200;
  });
  return (await getInvocation({ client: t.client, path: { invocationId: requestId } })).data!;
}

/** A handshake refused: its status and error body. */
export function refusedHandshake(url: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, ['realtime'], { headers });
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += String(c)));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    });
    ws.once('open', () => reject(new Error('the handshake was accepted')));
    ws.once('error', () => {});
  });
}

/**
 * A fallback route (its create answer) whose first target is a connection of `profile` where nothing listens, its
 * second the tenant's own connection with `modelMap`; the gateway's routes refreshed.
 */
export async function routeBehindDeadTarget(
  t: TestApp,
  tenant: Tenant,
  o: { name: string; profile: NonNullable<TenantSpec['profile']>; apiKey: string; modelMap: Record<string, string> },
) {
  const dead = await createProviderConnection({
    client: t.client,
    path: { workspaceId: tenant.workspaceId },
    body: { name: 'dead', protocolProfile: o.profile, baseUrl: 'http://127.0.0.1:1', apiKey: o.apiKey },
  });
  const route = await createRoute({
    client: t.client,
    path: { workspaceId: tenant.workspaceId },
    body: {
      name: o.name,
      strategy: 'fallback',
      targets: [{ providerConnectionId: dead.data!.id }, { providerConnectionId: tenant.connectionId, modelMap: o.modelMap }],
    },
  });
  await t.nexus.gateway.refreshRoutes();
  return route;
}
