/**
 * Billing under an archived workspace (read-only: every change answers 409
 * `workspace_archived`): refused requests leave nothing at the provider.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  archiveWorkspace,
  createCheckout,
  verifyBillingConnection,
} from '../../generated/client/sdk.gen.js';
import {
  accessOf,
  newConnection,
  newMapping,
  newPlan,
  newWorkspace,
  provision,
  startBillingWorld,
  type BillingWorld,
} from './billing-fixture.js';

let w: BillingWorld;

beforeAll(async () => {
  w = await startBillingWorld();
  w.stripe.prices.set('price_arch', 'prod_arch');
  w.paddle.prices.set('pri_arch', 'pro_arch');
});
afterAll(async () => {
  await w?.close();
});

type Provider = 'STRIPE' | 'PADDLE';

/** A workspace with a plan, a connection of the provider with a checkout-enabled mapping, and an access. */
async function world(provider: Provider) {
  const workspaceId = await newWorkspace(w, `archived-${provider}`);
  const planId = await newPlan(w, workspaceId, 'pro');
  const conn = await newConnection(w, workspaceId, { provider });
  const mappingId = provider === 'STRIPE' ? await newMapping(w, conn.dto.id, planId, 'prod_arch', 'price_arch') : await newMapping(w, conn.dto.id, planId, 'pro_arch', 'pri_arch');
  const accessId = await provision(w, workspaceId, planId);
  return { workspaceId, planId, conn, mappingId, accessId };
}

async function archive(workspaceId: string): Promise<void> {
  expect((await archiveWorkspace({ client: w.t.client, path: { workspaceId } })).response.status).toBe(204);
}

const requestsTo = (provider: Provider) => (provider === 'STRIPE' ? w.stripe.requests : w.paddle.requests);

/** Everything billing could have changed for the access, as stored. */
async function stateOf(workspaceId: string, accessId: string) {
  const db = w.t.database.db;
  return {
    access: await accessOf(w, accessId),
    periods: await db('quota_periods').where({ workspace_access_id: accessId }).orderBy('period_start'),
    projections: await db('external_subscriptions').where({ workspace_access_id: accessId }).orderBy('id'),
    grants: await db('billing_period_grants').where({ workspace_access_id: accessId }).orderBy('id'),
    checkouts: await db('billing_checkouts').where({ workspace_access_id: accessId }).orderBy('id'),
    connections: await db('billing_connections').where({ workspace_id: workspaceId }).orderBy('id'),
    audit: await db('audit_logs').where({ workspace_id: workspaceId }).orderBy('id'),
  };
}

describe.each<Provider>(['STRIPE', 'PADDLE'])('%s: requests refused under an archived workspace', (provider) => {
  it('createCheckout answers 409 workspace_archived and asks the provider for nothing', async () => {
    const { workspaceId, conn, mappingId, accessId } = await world(provider);
    await archive(workspaceId);
    const before = await stateOf(workspaceId, accessId);
    const seen = requestsTo(provider).length;
    const sessions = w.stripe.sessions.size + w.paddle.transactions.size;

    const res = await createCheckout({
      client: w.t.client,
      path: { accessId },
      body: { billingConnectionId: conn.dto.id, productMappingId: mappingId, successUrl: 'https://app.example.com/ok', customerEmail: 'buyer@example.com' },
      headers: { 'Idempotency-Key': `archived-${accessId}` },
    });
    expect(res.response.status).toBe(409);
    expect((res.error as any).error).toMatchObject({ code: 'workspace_archived', type: 'conflict_error', current_status: 'ARCHIVED' });
    expect(requestsTo(provider).slice(seen)).toEqual([]);
    expect(w.stripe.sessions.size + w.paddle.transactions.size).toBe(sessions);
    expect(await stateOf(workspaceId, accessId)).toEqual(before);
  });

  it('verifyBillingConnection answers 409 workspace_archived and asks the provider for nothing', async () => {
    const { workspaceId, conn, accessId } = await world(provider);
    await archive(workspaceId);
    const before = await stateOf(workspaceId, accessId);
    const seen = requestsTo(provider).length;

    const res = await verifyBillingConnection({ client: w.t.client, path: { connectionId: conn.dto.id } });
    expect(res.response.status).toBe(409);
    expect((res.error as any).error.code).toBe('workspace_archived');
    expect(requestsTo(provider).slice(seen)).toEqual([]);
    expect(await stateOf(workspaceId, accessId)).toEqual(before);
  });
});
