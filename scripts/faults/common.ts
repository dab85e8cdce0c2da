/** `npm run faults`' shared parts: the settings, the Nexus processes and their tenants, the database's view, the calls. */
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { adminClient, provisionTenant } from '../../test/support/tenant.js';
import { startNexusProcess, type NexusProcess } from '../lib/nexus-process.js';

export const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
export const PG_CONTROL = process.env.FAULTS_PG_CONTROL === '1';
export const ONLY = process.env.FAULTS_ONLY?.split(';').map((s) => s.trim());
export const ROOT_KEY = `nx-mgmt-faults-${randomBytes(16).toString('hex')}`;
const ENCRYPTION_KEY = randomBytes(32).toString('base64');
export const PROVIDER_KEY = 'sk-faults-upstream-0123456789';
export const SCHEMA = `faults_${randomBytes(5).toString('hex')}`;

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---- the upstream ---------------------------------------------------------------------------
/**
 * The headers that make the fake OpenAI upstream (test/support/upstreams/openai.ts) answer `tokens` output tokens
 * and 10 input tokens, whatever max_tokens asks: a stream one token an event, `delayMs` apart; a JSON answer
 * after `delayMs`.
 */
export const produce = (tokens: number, delayMs = 0): Record<string, string> => ({
  'x-fake-fault': 'runaway',
  'x-fake-usage': `10,${tokens},0`,
  ...(delayMs ? { 'x-fake-delay-ms': String(delayMs) } : {}),
});

// ---- Nexus processes and their tenants ------------------------------------------------------
export const dataRoot = mkdtempSync(join(tmpdir(), 'nexus-faults-'));
export const running: NexusProcess[] = [];

export async function nexus(databaseUrl = DATABASE_URL, env: Record<string, string> = {}): Promise<NexusProcess> {
  const process_ = await startNexusProcess({
    DATABASE_URL: databaseUrl,
    NEXUS_DATABASE_SCHEMA: SCHEMA,
    NEXUS_DATA_DIR: mkdtempSync(join(dataRoot, 'nexus-')),
    NEXUS_MANAGEMENT_KEY: ROOT_KEY,
    NEXUS_ENCRYPTION_KEY: ENCRYPTION_KEY,
    NEXUS_ALLOW_PRIVATE_UPSTREAMS: 'true',
    NEXUS_LOG_LEVEL: 'warn',
    ...(process.env.NEXUS_LEASE_TTL_MS ? { NEXUS_LEASE_TTL_MS: process.env.NEXUS_LEASE_TTL_MS } : {}),
    ...env,
  });
  running.push(process_);
  return process_;
}

export interface Tenant {
  workspaceId: string;
  accessId: string;
  connectionId: string;
  apiKey: string;
  gateway(nexus: NexusProcess): string;
}

let tenants = 0;
export async function tenant(
  via: NexusProcess,
  upstreamUrl: string,
  quotaUnits: number,
  maxOutputTokens = 1000,
  profile: 'openai' | 'anthropic' = 'openai',
): Promise<Tenant> {
  const made = await provisionTenant(adminClient(via.url, ROOT_KEY), {
    name: `faults-${++tenants}`,
    profile,
    baseUrl: upstreamUrl,
    providerKey: PROVIDER_KEY,
    quotaUnits: BigInt(quotaUnits),
    inputPpm: 1_000_000n,
    outputPpm: 1_000_000n,
    cachedPpm: 1_000_000n,
    maxOutputTokens,
  });
  const connectionId = made.connectionId;
  return {
    workspaceId: made.workspaceId,
    accessId: made.accessId,
    connectionId,
    apiKey: made.apiKey,
    gateway: (through) => `${through.url}/providers/${connectionId}/v1/${profile === 'openai' ? 'chat/completions' : 'messages'}`,
  };
}

// ---- the database's view ----------------------------------------------------------------------
export const db = new pg.Pool({ connectionString: DATABASE_URL, max: 4, options: `-c search_path=${SCHEMA}` });
// The outage ends this pool's idle connections too: the pool drops them, and the next query opens new ones.
db.on('error', () => {});

export async function period(accessId: string) {
  const { rows } = await db.query(
    'select granted_units, reserved_units, consumed_units from quota_periods where workspace_access_id = $1 order by period_start desc limit 1',
    [accessId],
  );
  const r = rows[0] as { granted_units: string; reserved_units: string; consumed_units: string };
  return { granted: BigInt(r.granted_units), reserved: BigInt(r.reserved_units), consumed: BigInt(r.consumed_units) };
}

export async function recorded(accessId: string) {
  const { rows } = await db.query('select request_id, status, error_code, quota_units from invocations where workspace_access_id = $1', [
    accessId,
  ]);
  return rows as { request_id: string; status: string; error_code: string | null; quota_units: string }[];
}

export async function until(check: () => Promise<boolean>, ms: number): Promise<number | null> {
  const started = Date.now();
  while (Date.now() - started < ms) {
    if (await check()) return Date.now() - started;
    await sleep(100);
  }
  return null;
}

// ---- calls ----------------------------------------------------------------------------------
const BODY = (o: { stream?: boolean; maxTokens?: number } = {}) =>
  JSON.stringify({
    model: 'faults-model',
    messages: [{ role: 'user', content: 'faults' }],
    max_tokens: o.maxTokens ?? 50,
    stream: o.stream ?? false,
  });

export interface Answer {
  status: number;
  requestId: string | null;
  /** Output tokens the client received (stream events with content, or the JSON's usage). */
  tokens: number;
  /** When its answer's headers arrived (Date.now()), if they did. */
  headersAt?: number;
}

/** An Anthropic Messages call's headers and body (a JSON answer only). */
const ANTHROPIC = (key: string, maxTokens: number) => ({
  headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01' },
  body: JSON.stringify({ model: 'faults-model', messages: [{ role: 'user', content: 'faults' }], max_tokens: maxTokens }),
});

export async function callOnce(
  url: string,
  key: string,
  o: { stream?: boolean; maxTokens?: number; headers?: Record<string, string>; anthropic?: boolean } = {},
): Promise<Answer> {
  try {
    const messages = o.anthropic ? ANTHROPIC(key, o.maxTokens ?? 50) : undefined;
    const res = await fetch(url, {
      method: 'POST',
      headers: { ...(messages?.headers ?? { authorization: `Bearer ${key}` }), 'content-type': 'application/json', ...o.headers },
      body: messages?.body ?? BODY(o),
    });
    const requestId = res.headers.get('x-nexus-request-id');
    const headersAt = Date.now();
    if (res.status !== 200 || !o.stream) {
      const text = await res.text().catch(() => '');
      let tokens = 0;
      try {
        const usage = (JSON.parse(text) as { usage?: { completion_tokens?: number; output_tokens?: number } }).usage;
        tokens = usage?.completion_tokens ?? usage?.output_tokens ?? 0;
      } catch {
        // not JSON
      }
      return { status: res.status, requestId, tokens, headersAt };
    }
    let tokens = 0;
    try {
      for await (const chunk of res.body! as unknown as AsyncIterable<Uint8Array>)
        tokens += (
          Buffer.from(chunk)
            .toString('utf8')
            .match(/"delta":\{"content":"/g) ?? []
        ).length;
    } catch {
      // cut off
    }
    return { status: res.status, requestId, tokens, headersAt };
  } catch {
    return { status: 0, requestId: null, tokens: 0 };
  }
}

export function statusLine(answers: Answer[]): string {
  const counts = new Map<number, number>();
  for (const a of answers) counts.set(a.status, (counts.get(a.status) ?? 0) + 1);
  return [...counts]
    .sort(([a], [b]) => a - b)
    .map(([s, n]) => `${s === 0 ? 'no answer' : s}×${n}`)
    .join(' ');
}

export interface Row {
  scenario: string;
  delivered: number;
  recorded: number;
  lost: number;
  charged: bigint;
  expected: string;
  overspend: bigint;
  reservedLeft: bigint;
  freedAfter: string;
  statuses: string;
}

/**
 * The calls a scenario delivered (their request ids), each meant to be charged 20 units: how many were
 * recorded, how many lost, what the period was charged against that, past its grant, and still reserved.
 */
export async function accountOf(
  accessId: string,
  delivered: string[],
): Promise<Pick<Row, 'delivered' | 'recorded' | 'lost' | 'charged' | 'expected' | 'overspend' | 'reservedLeft'>> {
  const ids = new Set((await recorded(accessId)).map((r) => r.request_id));
  const p = await period(accessId);
  const kept = delivered.filter((id) => ids.has(id)).length;
  return {
    delivered: delivered.length,
    recorded: kept,
    lost: delivered.length - kept,
    charged: p.consumed,
    expected: String(20n * BigInt(delivered.length)),
    overspend: p.consumed > p.granted ? p.consumed - p.granted : 0n,
    reservedLeft: p.reserved,
  };
}

export const BODY_BYTES = (o: { stream?: boolean; maxTokens?: number }) => BigInt(Buffer.byteLength(BODY(o)));
