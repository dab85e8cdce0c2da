/**
 * Gateway test support: tenants made through the Admin API (test/support/tenant.ts), the
 * contract-checking fetch for gateway calls, a call's invocation, and the period's numbers read from the database.
 */
import Anthropic from '@anthropic-ai/sdk';
import { BedrockRuntimeClient, type BedrockRuntimeClientConfig } from '@aws-sdk/client-bedrock-runtime';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import OpenAI from 'openai';
import type { Knex } from 'knex';
import { expect } from 'vitest';
import { createQuotaRepo } from '../../src/domain/quota/quota-repo.js';
import { createQuotaService } from '../../src/domain/quota/quota-service.js';
import { inspectorFor, prepareCall } from '../../src/protocols/inspectors.js';
import { contractFetch } from '../support/contract.js';
import { getInvocation, listInvocations } from '../support/sdk.js';
import type { TestApp } from '../support/test-app.js';
import { provisionTenant, type Tenant, type TenantSpec } from '../support/tenant.js';

export type { Tenant };

/** fetch for gateway calls (and SDKs): every answer is checked against the contract's proxyProvider* operations. */
export const gatewayFetch = contractFetch;

/** The official OpenAI SDK pointed at the tenant's gateway base URL, no retries, answers checked by the contract. */
export const openAiFor = (tenant: Tenant, headers: Record<string, string> = {}) =>
  new OpenAI({
    baseURL: tenant.gatewayBaseUrl + '/v1',
    apiKey: tenant.apiKey,
    fetch: gatewayFetch(),
    maxRetries: 0,
    defaultHeaders: headers,
  });

/** The official Anthropic SDK, the same way. */
export const anthropicFor = (tenant: Tenant, headers: Record<string, string> = {}) =>
  new Anthropic({ baseURL: tenant.gatewayBaseUrl, apiKey: tenant.apiKey, fetch: gatewayFetch(), maxRetries: 0, defaultHeaders: headers });

/**
 * The Bedrock SDK as the README configures it: the gateway base URL as its endpoint, the inference key as its
 * bearer token, and HTTP/1.1 (`requestHandler`: the SDK speaks HTTP/2 by default; Nexus serves HTTP/1.1), no
 * retries unless `config` says otherwise. `headers` are added to each request; `seen`, when given, keeps the
 * gateway's request id of each answer (the SDK's own `$metadata.requestId` is the upstream's x-amzn-requestid).
 */
export function bedrockFor(
  tenant: Tenant,
  headers: Record<string, string> = {},
  seen?: { requestId?: string },
  config: Partial<BedrockRuntimeClientConfig> = {},
) {
  const client = new BedrockRuntimeClient({
    region: 'us-east-1',
    endpoint: tenant.gatewayBaseUrl,
    token: { token: tenant.apiKey },
    authSchemePreference: ['httpBearerAuth'],
    requestHandler: new NodeHttpHandler(),
    maxAttempts: 1,
    ...config,
  });
  client.middlewareStack.add(
    (next) => async (args) => {
      Object.assign((args.request as { headers: Record<string, string> }).headers, headers);
      const out = await next(args);
      if (seen) seen.requestId = (out.response as { headers: Record<string, string> }).headers['x-nexus-request-id'];
      return out;
    },
    { step: 'build', name: 'testHeaders' },
  );
  return client;
}

/**
 * As if the lease's process had died: the access's HELD lease is made expired and swept, as another process's sweeper
 * would (the quota service's sweep, quota-service.ts), in one transaction. The lease's row stays locked from the expiry
 * to the sweep, so its process's heartbeat (every fifth of its TTL) cannot renew it in between, nor its own sweeper take
 * it first, however long a loaded host takes between the two statements: the heartbeat waits, then finds it EXPIRED.
 * The access must hold a lease; after the reclaim it is EXPIRED and the access holds none.
 */
export async function reclaimLease(t: TestApp, accessId: string): Promise<void> {
  const leases = (q: Knex) => q('quota_leases').where({ workspace_access_id: accessId });
  await t.database.db.transaction(async (tx) => {
    const expired = await leases(tx)
      .where({ status: 'HELD' })
      .update({ expires_at: new Date(Date.now() - 1) });
    expect(expired, `a HELD lease of access ${accessId} to reclaim`).toBeGreaterThan(0);
    await createQuotaService({ db: tx, quotaRepo: createQuotaRepo(tx) }).sweepExpired(new Date());
  });
  const statuses = (await leases(t.database.db).select<{ status: string }[]>('status')).map((l) => l.status);
  expect(statuses, `the leases of access ${accessId} after the reclaim`).not.toContain('HELD');
  expect(statuses).toContain('EXPIRED');
}

/** A workspace with one connection and one user on a published plan, made with the app's root client. */
/** The input bound the gateway admits a chat completion's JSON `body` at (its estimate, input-estimate.ts). */
export function chatInputBound(body: string): bigint {
  const chat = inspectorFor('openai', 'POST', 'v1/chat/completions')!;
  return prepareCall(chat, Buffer.from(body), { maxOutputTokens: 1_000_000, clamp: true }).inputBound;
}

export function createTenant(t: TestApp, o: TenantSpec): Promise<Tenant> {
  return provisionTenant(t.client, o);
}

/** The access's current period numbers, straight from the database. */
export async function periodOf(t: TestApp, accessId: string) {
  const row = await t.database.db('quota_periods').where({ workspace_access_id: accessId }).orderBy('period_start', 'desc').first();
  return { granted: BigInt(row.granted_units), reserved: BigInt(row.reserved_units), consumed: BigInt(row.consumed_units) };
}

/** Waits until `check` holds, asking every 25 ms; fails after `ms`. */
export async function until(check: () => Promise<boolean>, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('condition not reached in time');
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** A call's invocation, found by its request id (listInvocations `q`) once the gateway's records are written. */
export async function invocationByRequestId(t: TestApp, workspaceId: string, requestId: string) {
  await t.nexus.gateway.drain();
  const list = await listInvocations({ client: t.client, path: { workspaceId }, query: { q: requestId } });
  const found = list.data?.[0];
  expect(found, `invocation ${requestId}`).toBeTruthy();
  const full = await getInvocation({ client: t.client, path: { invocationId: found!.id } });
  expect(full.response.status).toBe(200);
  return full.data!;
}
