/**
 * Billing under an archived workspace (read-only: every change answers 409
 * `workspace_archived`): refused requests leave nothing at the provider, and
 * webhooks are acknowledged, recorded IGNORED and change nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  archiveWorkspace,
  createCheckout,
  listBillingWebhookEvents,
  replayBillingWebhookEvent,
  verifyBillingConnection,
} from '../support/sdk.js';
import {
  accessOf,
  at,
  DAY,
  GRACE_HOURS,
  HOUR,
  deliverPaddle,
  deliverStripe,
  newConnection,
  newMapping,
  newPlan,
  newWorkspace,
  projectionsOf,
  provision,
  startBillingWorld,
  type BillingWorld,
  type Conn,
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
  const mappingId =
    provider === 'STRIPE'
      ? await newMapping(w, conn.dto.id, planId, 'prod_arch', 'price_arch')
      : await newMapping(w, conn.dto.id, planId, 'pro_arch', 'pri_arch');
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

/** Checks out, pays and delivers the subscription's creation: the access is on a billed period. */
async function subscribed(provider: Provider, conn: Conn, mappingId: string, accessId: string) {
  const checkout = await createCheckout({
    client: w.t.client,
    path: { accessId },
    body: {
      billingConnectionId: conn.dto.id,
      productMappingId: mappingId,
      ...(provider === 'STRIPE' ? { successUrl: 'https://app.example.com/ok' } : {}),
    },
  });
  expect(checkout.response.status).toBe(201);
  const paidAt = w.clock.now();
  const period = { start: paidAt, end: at(paidAt, 30 * DAY) };
  if (provider === 'STRIPE') {
    const sub = w.stripe.completeCheckout(checkout.data!.providerCheckoutId, period);
    await deliverStripe(w, conn, w.stripe.event('customer.subscription.created', w.stripe.snapshot(sub.id), paidAt));
    return sub.id;
  }
  const sub = w.paddle.completeTransaction(checkout.data!.providerCheckoutId, period, paidAt);
  await deliverPaddle(w, conn, w.paddle.event('subscription.created', sub, paidAt));
  return sub.id;
}

/** The provider renews the subscription into its next period, then stops it (Stripe unpaid, Paddle paused: either suspends); both events delivered. */
async function renewThenStop(provider: Provider, conn: Conn, subId: string) {
  const renewedAt = at(w.clock.now(), 30 * DAY);
  const next = { start: renewedAt, end: at(renewedAt, 30 * DAY) };
  const unpaidAt = at(renewedAt, DAY);
  if (provider === 'STRIPE') {
    await deliverStripe(w, conn, w.stripe.event('customer.subscription.updated', w.stripe.update(subId, { period: next }), renewedAt));
    await deliverStripe(w, conn, w.stripe.event('customer.subscription.updated', w.stripe.update(subId, { status: 'unpaid' }), unpaidAt));
  } else {
    await deliverPaddle(w, conn, w.paddle.event('subscription.updated', w.paddle.update(subId, renewedAt, { period: next }), renewedAt));
    await deliverPaddle(w, conn, w.paddle.event('subscription.paused', w.paddle.update(subId, unpaidAt, { status: 'paused' }), unpaidAt));
  }
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
      body: {
        billingConnectionId: conn.dto.id,
        productMappingId: mappingId,
        successUrl: 'https://app.example.com/ok',
        customerEmail: 'buyer@example.com',
      },
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

describe.each<Provider>(['STRIPE', 'PADDLE'])('%s: webhooks under an archived workspace', (provider) => {
  it('are acknowledged, recorded IGNORED (workspace_archived) and change nothing: no period granted, no suspension', async () => {
    const { workspaceId, planId, conn, mappingId, accessId } = await world(provider);
    const subId = await subscribed(provider, conn, mappingId, accessId);
    expect(await accessOf(w, accessId)).toMatchObject({ status: 'ACTIVE', planId });
    await archive(workspaceId);
    const before = await stateOf(workspaceId, accessId);
    expect(before.grants).toHaveLength(1);
    const seen = requestsTo(provider).length;

    await renewThenStop(provider, conn, subId);

    const events = await listBillingWebhookEvents({ client: w.t.client, path: { connectionId: conn.dto.id } });
    expect(events.data!.slice(0, 2).map((e) => [e.status, e.lastError])).toEqual([
      ['IGNORED', 'workspace_archived'],
      ['IGNORED', 'workspace_archived'],
    ]);
    expect(await stateOf(workspaceId, accessId)).toEqual(before);
    // Not even re-read from the provider.
    expect(requestsTo(provider).slice(seen)).toEqual([]);
  });
});

/** The subscription renews into its next period with the payment failing (past_due), delivered at that period's start. */
async function renewPastDue(provider: Provider, conn: Conn, subId: string) {
  const renewedAt = w.clock.advance(30 * DAY);
  const next = { start: renewedAt, end: at(renewedAt, 30 * DAY) };
  if (provider === 'STRIPE') {
    await deliverStripe(
      w,
      conn,
      w.stripe.event('customer.subscription.updated', w.stripe.update(subId, { status: 'past_due', period: next }), renewedAt),
    );
  } else {
    await deliverPaddle(
      w,
      conn,
      w.paddle.event('subscription.past_due', w.paddle.update(subId, renewedAt, { status: 'past_due', period: next }), renewedAt),
    );
  }
}

describe.each<Provider>(['STRIPE', 'PADDLE'])('%s: the billing tick under an archived workspace', (provider) => {
  it('leaves the accesses untouched: a past_due access is not suspended when its grace ends', async () => {
    const { workspaceId, conn, mappingId, accessId } = await world(provider);
    const subId = await subscribed(provider, conn, mappingId, accessId);
    await renewPastDue(provider, conn, subId);
    expect((await projectionsOf(w, accessId))[0]).toMatchObject({ status: 'past_due' });
    expect(await accessOf(w, accessId)).toMatchObject({ status: 'ACTIVE' });
    await archive(workspaceId);
    const before = await stateOf(workspaceId, accessId);

    w.clock.advance((GRACE_HOURS + 1) * HOUR);
    expect(await w.t.hooks.billingPasses.tick()).toBe(0);

    expect(await accessOf(w, accessId)).toMatchObject({ status: 'ACTIVE' });
    expect(await stateOf(workspaceId, accessId)).toEqual(before);
  });
});

describe('replayBillingWebhookEvent under an archived workspace', () => {
  it('answers 409 workspace_archived: the event stays FAILED, nothing is reprocessed, audited or asked of Stripe', async () => {
    const { workspaceId, conn, mappingId, accessId } = await world('STRIPE');
    const subId = await subscribed('STRIPE', conn, mappingId, accessId);
    w.stripe.failReads = 1;
    const event = w.stripe.event('customer.subscription.updated', w.stripe.update(subId, { status: 'unpaid' }), w.clock.now());
    await deliverStripe(w, conn, event);
    const failed = await w.t.database.db('billing_webhook_events').where({ provider_event_id: event.id }).first();
    expect(failed).toMatchObject({ status: 'FAILED', attempts: 1 });
    await archive(workspaceId);
    const before = await stateOf(workspaceId, accessId);
    const seen = w.stripe.requests.length;

    const res = await replayBillingWebhookEvent({ client: w.t.client, path: { eventId: failed.id } });
    expect(res.response.status).toBe(409);
    expect((res.error as any).error).toMatchObject({ code: 'workspace_archived', current_status: 'ARCHIVED' });
    expect(await w.t.database.db('billing_webhook_events').where({ id: failed.id }).first()).toMatchObject({
      status: 'FAILED',
      attempts: 1,
    });
    expect(await stateOf(workspaceId, accessId)).toEqual(before);
    expect(w.stripe.requests.slice(seen)).toEqual([]);

    // The automatic retry does not apply it either: it records why.
    w.clock.advance(3 * 60_000);
    await w.t.hooks.billingPasses.processPending();
    expect(await w.t.database.db('billing_webhook_events').where({ id: failed.id }).first()).toMatchObject({
      status: 'IGNORED',
      last_error: 'workspace_archived',
    });
    expect(await stateOf(workspaceId, accessId)).toEqual(before);
    expect(w.stripe.requests.slice(seen)).toEqual([]);
  });
});
