/**
 * The billing scenarios, end to end through HTTP: provider-hosted checkout, signed
 * webhooks into the inbox, re-reads from the (fake) provider, projections driving
 * the access and its quota periods, reconciliation and APP_SYNC reports.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createCheckout,
  getWorkspaceAccessQuota,
  listBillingWebhookEvents,
  reconcileBillingConnection,
  replayBillingWebhookEvent,
  syncWorkspaceAccessBillingPeriod,
} from '../support/sdk.js';
import {
  accessOf,
  at,
  billingPeriods,
  DAY,
  deliverPaddle,
  deliverStripe,
  freeAndProWorkspace,
  grantRows,
  GRACE_HOURS,
  HOUR,
  newConnection,
  newMapping,
  newPlan,
  projectionsOf,
  provision,
  startBillingWorld,
  T0,
  type BillingWorld,
  type Conn,
} from './billing-fixture.js';

let w: BillingWorld;
let workspaceId: string;
let freePlan: string;
let proPlan: string;
let maxPlan: string;
let conn: Conn;

beforeAll(async () => {
  w = await startBillingWorld();
  ({ workspaceId, freePlan, proPlan, conn } = await freeAndProWorkspace(w));
  maxPlan = await newPlan(w, workspaceId, 'max', '5000');
  w.stripe.prices.set('price_max', 'prod_max');
  await newMapping(w, conn.dto.id, maxPlan, 'prod_max', 'price_max');
});
afterAll(async () => {
  await w?.close();
});

/** Provisions an access at `start`, checks it out on price_pro and delivers the events; returns ids. */
async function subscribed(start: Date) {
  w.clock.set(start);
  const accessId = await provision(w, workspaceId, freePlan);
  const productMappings = await w.t.database
    .db('billing_product_mappings')
    .where({ billing_connection_id: conn.dto.id, external_price_id: 'price_pro' })
    .first();
  const checkout = await createCheckout({
    client: w.t.client,
    path: { accessId },
    body: { billingConnectionId: conn.dto.id, productMappingId: productMappings.id, successUrl: 'https://app.example.com/ok' },
    headers: { 'Idempotency-Key': `co-${accessId}` },
  });
  expect(checkout.response.status).toBe(201);
  const paidAt = w.clock.advance(HOUR);
  const period = { start: paidAt, end: at(paidAt, 30 * DAY) };
  const sub = w.stripe.completeCheckout(checkout.data!.providerCheckoutId, period);
  const session = w.stripe.sessions.get(checkout.data!.providerCheckoutId)!;
  await deliverStripe(
    w,
    conn,
    w.stripe.event(
      'checkout.session.completed',
      { id: session.id, object: 'checkout.session', mode: 'subscription', client_reference_id: accessId, subscription: sub.id },
      paidAt,
    ),
  );
  await deliverStripe(w, conn, w.stripe.event('customer.subscription.created', w.stripe.snapshot(sub.id), paidAt));
  return { accessId, subId: sub.id, period, checkout: checkout.data! };
}

describe('checkout to ACTIVE', () => {
  it('creates a Stripe Checkout Session for the access, and the paid subscription moves it to the mapped plan with one billed period', async () => {
    // (An administrator's suspension would stay: billing lifts only its own, billing.takeover-and-suspensions.test.ts.)
    const { accessId, subId, period, checkout } = await subscribed(T0);

    // What Stripe was asked for.
    const session = w.stripe.sessions.get(checkout.providerCheckoutId)!;
    expect(session).toMatchObject({
      mode: 'subscription',
      client_reference_id: accessId,
      'subscription_data[metadata][nexus_workspace_access_id]': accessId,
      'line_items[0][price]': 'price_pro',
      success_url: 'https://app.example.com/ok',
    });
    expect(session.idempotencyKey).toContain(`co-${accessId}`);
    expect(checkout.url).toBe(`https://checkout.stripe.test/c/pay/${checkout.providerCheckoutId}`);
    expect(checkout).toMatchObject({ workspaceAccessId: accessId, billingConnectionId: conn.dto.id, provider: 'STRIPE' });

    const access = await accessOf(w, accessId);
    expect(access).toMatchObject({ status: 'ACTIVE', planId: proPlan });
    const [projection] = await projectionsOf(w, accessId);
    expect(projection).toMatchObject({
      externalSubscriptionId: subId,
      status: 'active',
      planId: proPlan,
      externalPriceId: 'price_pro',
      externalProductId: 'prod_pro',
      currentPeriodStart: period.start.toISOString(),
      currentPeriodEnd: period.end.toISOString(),
      cancelAtPeriodEnd: false,
      provider: 'STRIPE',
    });
    const periods = await billingPeriods(w, accessId);
    expect(periods).toHaveLength(1);
    expect(periods[0]).toMatchObject({ plan_id: proPlan });
    expect(String(periods[0].granted_units)).toBe('1000');
    expect(periods[0].period_start.toISOString()).toBe(period.start.toISOString());

    const events = await listBillingWebhookEvents({
      client: w.t.client,
      path: { connectionId: conn.dto.id },
      query: { type: 'customer.subscription.created' },
    });
    expect(events.data!.some((e) => e.status === 'PROCESSED' && e.attempts === 1 && e.signatureVerified)).toBe(true);
  });
});

describe('duplicate delivery', () => {
  it('answers 200 to the same event again and changes nothing', async () => {
    const { accessId, subId } = await subscribed(at(T0, 2 * DAY));
    const event = w.stripe.event('customer.subscription.updated', w.stripe.snapshot(subId), w.clock.now());
    const first = await deliverStripe(w, conn, event);
    expect(first.body).toEqual({ received: true, duplicate: false });
    const before = { periods: await billingPeriods(w, accessId), projections: await projectionsOf(w, accessId) };
    for (let i = 0; i < 3; i++) {
      const again = await deliverStripe(w, conn, event);
      expect(again.body).toEqual({ received: true, duplicate: true });
    }
    const stored = await w.t.database
      .db('billing_webhook_events')
      .where({ billing_connection_id: conn.dto.id, provider_event_id: event.id });
    expect(stored).toHaveLength(1);
    expect(stored[0].attempts).toBe(1);
    expect(await billingPeriods(w, accessId)).toEqual(before.periods);
    expect(await projectionsOf(w, accessId)).toEqual(before.projections);
  });
});

describe('concurrent deliveries', () => {
  it('the same events delivered many times at once are stored once each and grant the period once', async () => {
    w.clock.set(at(T0, 3 * DAY));
    const accessId = await provision(w, workspaceId, freePlan);
    const start = w.clock.advance(HOUR);
    const sub = w.stripe.createSubscription({
      price: 'price_pro',
      metadata: { nexus_workspace_access_id: accessId },
      period: { start, end: at(start, 30 * DAY) },
    });
    const events = [
      w.stripe.event('customer.subscription.created', w.stripe.snapshot(sub.id), start),
      w.stripe.event('customer.subscription.updated', w.stripe.snapshot(sub.id), start),
      w.stripe.event('invoice.paid', { id: 'in_c', object: 'invoice', parent: { subscription_details: { subscription: sub.id } } }, start),
    ];
    const answers = await Promise.all(
      [...events, ...events, ...events, ...events].map((e) => deliverStripe(w, conn, e, { process: false })),
    );
    expect(answers.filter((a) => !a.body.duplicate)).toHaveLength(3);
    await w.t.hooks.billingPasses.processPending();
    const stored = await w.t.database.db('billing_webhook_events').whereIn(
      'provider_event_id',
      events.map((e) => e.id),
    );
    expect(stored.map((e: any) => e.status)).toEqual(['PROCESSED', 'PROCESSED', 'PROCESSED']);
    expect(await grantRows(w, accessId)).toHaveLength(1);
    expect(await billingPeriods(w, accessId)).toHaveLength(1);
    expect((await accessOf(w, accessId)).planId).toBe(proPlan);
  });
});

describe('out-of-order delivery', () => {
  it('`updated` before `created`: the projection ends at the provider state, granted once', async () => {
    w.clock.set(at(T0, 4 * DAY));
    const accessId = await provision(w, workspaceId, freePlan);
    const start = w.clock.advance(HOUR);
    const sub = w.stripe.createSubscription({
      price: 'price_pro',
      metadata: { nexus_workspace_access_id: accessId },
      period: { start, end: at(start, 30 * DAY) },
    });
    const created = w.stripe.event('customer.subscription.created', w.stripe.snapshot(sub.id), start);
    const upgradedAt = w.clock.advance(HOUR);
    const updated = w.stripe.event('customer.subscription.updated', w.stripe.update(sub.id, { price: 'price_max' }), upgradedAt);
    await deliverStripe(w, conn, updated);
    await deliverStripe(w, conn, created);
    const [projection] = await projectionsOf(w, accessId);
    expect(projection).toMatchObject({ status: 'active', planId: maxPlan, externalPriceId: 'price_max' });
    expect((await accessOf(w, accessId)).planId).toBe(maxPlan);
    expect(await grantRows(w, accessId)).toHaveLength(1);
  });

  it('a stale `unpaid` delivered after `active` does not regress the projection or the access', async () => {
    const { accessId, subId } = await subscribed(at(T0, 6 * DAY));
    // Earlier, the subscription had been unpaid; that event arrives only now.
    const stale = w.stripe.event(
      'customer.subscription.updated',
      { ...w.stripe.snapshot(subId), status: 'unpaid' },
      at(w.clock.now(), -30 * 60_000),
    );
    await deliverStripe(w, conn, stale);
    expect((await projectionsOf(w, accessId))[0]!.status).toBe('active');
    expect((await accessOf(w, accessId)).status).toBe('ACTIVE');
  });

  it('without a credential (no re-read), the payload is ordered by its source time', async () => {
    const payloadConn = await newConnection(w, workspaceId, { credential: false });
    await newMapping(w, payloadConn.dto.id, proPlan, 'prod_pro', 'price_pro');
    w.clock.set(at(T0, 8 * DAY));
    const accessId = await provision(w, workspaceId, freePlan);
    const start = w.clock.advance(HOUR);
    const sub = w.stripe.createSubscription({
      price: 'price_pro',
      metadata: { nexus_workspace_access_id: accessId },
      period: { start, end: at(start, 30 * DAY) },
    });
    const active = w.stripe.event('customer.subscription.created', w.stripe.snapshot(sub.id), start);
    const unpaid = w.stripe.event('customer.subscription.updated', w.stripe.update(sub.id, { status: 'unpaid' }), at(start, 10 * 60_000));
    w.clock.advance(HOUR);
    await deliverStripe(w, payloadConn, unpaid);
    await deliverStripe(w, payloadConn, active);
    expect((await projectionsOf(w, accessId))[0]).toMatchObject({
      status: 'unpaid',
      sourceUpdatedAt: at(start, 10 * 60_000).toISOString(),
    });
    expect((await accessOf(w, accessId)).status).toBe('SUSPENDED');
    expect(await grantRows(w, accessId)).toHaveLength(1);
  });
});

describe('reconciliation', () => {
  it('repairs a missed webhook, records what it changed, and a second run changes nothing', async () => {
    const { accessId, subId } = await subscribed(at(T0, 10 * DAY));
    // The subscription went unpaid at Stripe; the webhook never arrived.
    w.stripe.update(subId, { status: 'unpaid' });
    w.clock.advance(HOUR);
    const first = await reconcileBillingConnection({ client: w.t.client, path: { connectionId: conn.dto.id } });
    expect(first.response.status).toBe(200);
    expect(first.data!.accepted).toBe(true);
    const run = await w.t.database.db('reconciliation_runs').where({ id: first.data!.operationId }).first();
    expect(run).toMatchObject({ status: 'SUCCEEDED', billing_connection_id: conn.dto.id });
    const mine = (run.changes as any[]).find((c) => c.externalSubscriptionId === subId);
    expect(mine.changes.status).toEqual({ from: 'active', to: 'unpaid' });
    expect(mine.effects).toContain('access:ACTIVE->SUSPENDED');
    expect((await accessOf(w, accessId)).status).toBe('SUSPENDED');

    const second = await reconcileBillingConnection({ client: w.t.client, path: { connectionId: conn.dto.id } });
    const run2 = await w.t.database.db('reconciliation_runs').where({ id: second.data!.operationId }).first();
    expect(run2).toMatchObject({ status: 'SUCCEEDED', changed: 0 });
    expect(run2.examined).toBe(run.examined);
  });
});

describe('processing failure and replay', () => {
  it('records FAILED with the attempt and the error, lists it, and a replay processes the stored body', async () => {
    const { accessId, subId } = await subscribed(at(T0, 12 * DAY));
    w.stripe.update(subId, { cancelAtPeriodEnd: true });
    w.stripe.failReads = 1;
    const event = w.stripe.event('customer.subscription.updated', w.stripe.snapshot(subId), w.clock.now());
    const res = await deliverStripe(w, conn, event);
    expect(res.status).toBe(200);
    const failed = await listBillingWebhookEvents({ client: w.t.client, path: { connectionId: conn.dto.id }, query: { status: 'FAILED' } });
    const mine = failed.data!.find((e) => e.providerEventId === event.id)!;
    expect(mine).toMatchObject({ status: 'FAILED', attempts: 1, type: 'customer.subscription.updated' });
    expect(mine.lastError).toMatch(/provider_unavailable/);
    expect((await projectionsOf(w, accessId))[0]!.cancelAtPeriodEnd).toBe(false);

    // Much later (no freshness window, no new signature check): replay.
    w.clock.advance(2 * DAY);
    const replay = await replayBillingWebhookEvent({ client: w.t.client, path: { eventId: mine.id } });
    expect(replay.response.status).toBe(200);
    expect(replay.data).toEqual({ accepted: true, operationId: mine.id });
    const after = await listBillingWebhookEvents({
      client: w.t.client,
      path: { connectionId: conn.dto.id },
      query: { status: 'PROCESSED', type: 'customer.subscription.updated' },
    });
    expect(after.data!.find((e) => e.id === mine.id)).toMatchObject({ status: 'PROCESSED', attempts: 2 });
    expect((await projectionsOf(w, accessId))[0]!.cancelAtPeriodEnd).toBe(true);

    const again = await replayBillingWebhookEvent({ client: w.t.client, path: { eventId: mine.id } });
    expect(again.response.status).toBe(409);
    expect((again.error as any).error.code).toBe('event_not_replayable');
  });
});

describe('automatic retries', () => {
  it('retries a FAILED event from the periodic pass after a growing backoff, up to a bound; replay still works after', async () => {
    const { accessId, subId } = await subscribed(at(T0, 14 * DAY));
    w.stripe.update(subId, { cancelAtPeriodEnd: true });
    w.stripe.failReads = 1000;
    const event = w.stripe.event('customer.subscription.updated', w.stripe.snapshot(subId), w.clock.now());
    await deliverStripe(w, conn, event);
    const attempts = async () => {
      await w.t.hooks.billingPasses.processPending();
      return w.t.database.db('billing_webhook_events').where({ provider_event_id: event.id }).first();
    };
    expect(await attempts()).toMatchObject({ status: 'FAILED', attempts: 1 });
    w.clock.advance(60_000);
    expect((await attempts()).attempts).toBe(1);
    for (const [minutes, expected] of [
      [2, 2],
      [4, 3],
      [8, 4],
      [16, 5],
    ] as const) {
      w.clock.advance(minutes * 60_000);
      expect((await attempts()).attempts).toBe(expected);
    }
    w.stripe.failReads = 0;
    w.clock.advance(DAY);
    expect(await attempts()).toMatchObject({ status: 'FAILED', attempts: 5 });
    const replay = await replayBillingWebhookEvent({ client: w.t.client, path: { eventId: (await attempts()).id } });
    expect(replay.response.status).toBe(200);
    expect(await attempts()).toMatchObject({ status: 'PROCESSED', attempts: 6 });
    expect((await projectionsOf(w, accessId))[0]!.cancelAtPeriodEnd).toBe(true);
  });
});

describe('plan changes mid-period', () => {
  it('upgrade then downgrade move the access between the mapped plans, the period granted once', async () => {
    const { accessId, subId, period } = await subscribed(at(T0, 16 * DAY));
    w.clock.set(at(period.start, 10 * DAY));
    await deliverStripe(
      w,
      conn,
      w.stripe.event('customer.subscription.updated', w.stripe.update(subId, { price: 'price_max' }), w.clock.now()),
    );
    expect((await accessOf(w, accessId)).planId).toBe(maxPlan);
    const afterUpgrade = await w.t.database.db('quota_periods').where({ workspace_access_id: accessId }).orderBy('period_start');
    expect(afterUpgrade.some((p: any) => p.plan_id === maxPlan && p.period_start.getTime() === w.clock.now().getTime())).toBe(true);

    w.clock.set(at(period.start, 20 * DAY));
    await deliverStripe(
      w,
      conn,
      w.stripe.event('customer.subscription.updated', w.stripe.update(subId, { price: 'price_pro' }), w.clock.now()),
    );
    expect((await accessOf(w, accessId)).planId).toBe(proPlan);
    expect((await projectionsOf(w, accessId))[0]).toMatchObject({ planId: proPlan, externalPriceId: 'price_pro' });
    expect(await grantRows(w, accessId)).toHaveLength(1);
  });
});

describe('the provider restarts the billing cycle mid-period', () => {
  async function quotaOf(accessId: string) {
    const res = await getWorkspaceAccessQuota({ client: w.t.client, path: { accessId } });
    expect(res.response.status).toBe(200);
    return res.data!;
  }

  it('a trial ended early: the paid period replaces the rest of the trial, and the access stays usable past the trial’s end', async () => {
    w.clock.set(at(T0, 50 * DAY));
    const accessId = await provision(w, workspaceId, freePlan);
    const start = w.clock.advance(HOUR);
    const trial = { start, end: at(start, 14 * DAY) };
    const sub = w.stripe.createSubscription({
      price: 'price_pro',
      status: 'trialing',
      metadata: { nexus_workspace_access_id: accessId },
      period: trial,
    });
    await deliverStripe(w, conn, w.stripe.event('customer.subscription.created', w.stripe.snapshot(sub.id), start));
    expect(await accessOf(w, accessId)).toMatchObject({ status: 'ACTIVE', planId: proPlan });

    // Day 3: the customer pays now (Stripe: trial_end=now); the first paid period starts then.
    const paidAt = at(start, 3 * DAY);
    w.clock.set(paidAt);
    const paid = { start: paidAt, end: at(paidAt, 30 * DAY) };
    w.clock.advance(20_000);
    await deliverStripe(
      w,
      conn,
      w.stripe.event('customer.subscription.updated', w.stripe.update(sub.id, { status: 'active', period: paid }), paidAt),
    );
    expect((await grantRows(w, accessId)).map((g: any) => g.outcome)).toEqual(['granted', 'granted']);
    const periods = await billingPeriods(w, accessId);
    expect(periods.map((p: any) => [p.period_start.toISOString(), p.period_end.toISOString()])).toEqual([
      [trial.start.toISOString(), paid.start.toISOString()],
      [paid.start.toISOString(), paid.end.toISOString()],
    ]);

    // Past the trial's original end: still ACTIVE, on the paid period.
    w.clock.set(at(trial.end, DAY));
    expect(await accessOf(w, accessId)).toMatchObject({ status: 'ACTIVE', planId: proPlan });
    expect(await quotaOf(accessId)).toMatchObject({ grantedUnits: '1000', periodEnd: paid.end.toISOString() });
  });

  it('a change of price that resets the billing anchor: the new plan’s period is granted in full from the change, past the old period’s end', async () => {
    const { accessId, subId, period } = await subscribed(at(T0, 60 * DAY));
    const changedAt = at(period.start, 10 * DAY);
    const next = { start: changedAt, end: at(changedAt, 30 * DAY) };
    w.clock.set(at(changedAt, 30_000));
    await deliverStripe(
      w,
      conn,
      w.stripe.event('customer.subscription.updated', w.stripe.update(subId, { price: 'price_max', period: next }), changedAt),
    );
    expect((await grantRows(w, accessId)).map((g: any) => g.outcome)).toEqual(['granted', 'granted']);
    expect(await accessOf(w, accessId)).toMatchObject({ status: 'ACTIVE', planId: maxPlan });
    expect(await quotaOf(accessId)).toMatchObject({ planId: maxPlan, grantedUnits: '5000', periodEnd: next.end.toISOString() });

    w.clock.set(at(period.end, DAY));
    expect(await accessOf(w, accessId)).toMatchObject({ status: 'ACTIVE', planId: maxPlan });
    expect(await quotaOf(accessId)).toMatchObject({ grantedUnits: '5000', periodEnd: next.end.toISOString() });
  });
});

describe('past_due, grace, SUSPENDED, recovered', () => {
  it('keeps the access ACTIVE through the grace, suspends it after, and reactivates it on payment', async () => {
    const { accessId, subId, period } = await subscribed(at(T0, 20 * DAY));
    // Renewal: the new period opens but the payment fails.
    w.clock.set(period.end);
    const p2 = { start: period.end, end: at(period.end, 30 * DAY) };
    await deliverStripe(
      w,
      conn,
      w.stripe.event('customer.subscription.updated', w.stripe.update(subId, { status: 'past_due', period: p2 }), w.clock.now()),
    );
    expect((await accessOf(w, accessId)).status).toBe('ACTIVE');
    expect((await projectionsOf(w, accessId))[0]).toMatchObject({ status: 'past_due', pastDueSince: p2.start.toISOString() });
    expect(await grantRows(w, accessId)).toHaveLength(2);

    w.clock.advance((GRACE_HOURS - 1) * HOUR);
    await w.t.hooks.billingPasses.tick();
    expect((await accessOf(w, accessId)).status).toBe('ACTIVE');
    w.clock.advance(2 * HOUR);
    await w.t.hooks.billingPasses.tick();
    expect((await accessOf(w, accessId)).status).toBe('SUSPENDED');

    w.stripe.update(subId, { status: 'active' });
    const invoice = { id: 'in_1', object: 'invoice', parent: { subscription_details: { subscription: subId } } };
    await deliverStripe(w, conn, w.stripe.event('invoice.paid', invoice, w.clock.now()));
    expect((await accessOf(w, accessId)).status).toBe('ACTIVE');
    expect((await projectionsOf(w, accessId))[0]!.pastDueSince).toBeUndefined();
    expect(await grantRows(w, accessId)).toHaveLength(2);
  });
});

describe('cancel at period end', () => {
  it('stays ACTIVE until the period ends, then EXPIRED', async () => {
    const { accessId, subId, period } = await subscribed(at(T0, 24 * DAY));
    w.clock.set(at(period.start, 5 * DAY));
    await deliverStripe(
      w,
      conn,
      w.stripe.event('customer.subscription.updated', w.stripe.update(subId, { cancelAtPeriodEnd: true }), w.clock.now()),
    );
    expect((await accessOf(w, accessId)).status).toBe('ACTIVE');
    expect((await projectionsOf(w, accessId))[0]!.cancelAtPeriodEnd).toBe(true);
    w.clock.set(at(period.end, -60_000));
    await w.t.hooks.billingPasses.tick();
    expect((await accessOf(w, accessId)).status).toBe('ACTIVE');
    w.clock.set(at(period.end, 60_000));
    await w.t.hooks.billingPasses.tick();
    expect((await accessOf(w, accessId)).status).toBe('EXPIRED');
    // Stripe then reports the end; nothing is granted for it.
    w.stripe.update(subId, { status: 'canceled', endedAt: period.end, canceledAt: period.end });
    await deliverStripe(w, conn, w.stripe.event('customer.subscription.deleted', w.stripe.snapshot(subId), w.clock.now()));
    expect((await accessOf(w, accessId)).status).toBe('EXPIRED');
    expect(await grantRows(w, accessId)).toHaveLength(1);
  });
});

describe('Paddle', () => {
  it('checkout through a transaction, the subscription webhook activates the access', async () => {
    const paddleConn = await newConnection(w, workspaceId, { provider: 'PADDLE' });
    w.paddle.prices.set('pri_pro', 'pro_pro');
    const mappingId = await newMapping(w, paddleConn.dto.id, proPlan, 'pro_pro', 'pri_pro');
    w.clock.set(at(T0, 30 * DAY));
    const accessId = await provision(w, workspaceId, freePlan);
    const checkout = await createCheckout({
      client: w.t.client,
      path: { accessId },
      body: { billingConnectionId: paddleConn.dto.id, productMappingId: mappingId },
      headers: { 'Idempotency-Key': `pd-${accessId}` },
    });
    expect(checkout.response.status).toBe(201);
    expect(checkout.data!.providerCheckoutId).toMatch(/^txn_/);
    const txn = w.paddle.transactions.get(checkout.data!.providerCheckoutId)!;
    expect(txn.custom_data).toEqual({ nexus_workspace_access_id: accessId });
    expect(txn.idempotencyKey).toContain(`pd-${accessId}`);

    const paidAt = w.clock.advance(HOUR);
    const sub = w.paddle.completeTransaction(txn.id, { start: paidAt, end: at(paidAt, 30 * DAY) }, paidAt);
    await deliverPaddle(w, paddleConn, w.paddle.event('subscription.created', sub, paidAt));
    expect(await accessOf(w, accessId)).toMatchObject({ status: 'ACTIVE', planId: proPlan });
    expect((await projectionsOf(w, accessId))[0]).toMatchObject({ provider: 'PADDLE', status: 'active', externalSubscriptionId: sub.id });

    // Paused at Paddle: suspended.
    const pausedAt = w.clock.advance(DAY);
    await deliverPaddle(
      w,
      paddleConn,
      w.paddle.event('subscription.paused', w.paddle.update(sub.id, pausedAt, { status: 'paused' }), pausedAt),
    );
    expect((await accessOf(w, accessId)).status).toBe('SUSPENDED');
    expect(await grantRows(w, accessId)).toHaveLength(1);

    // Resumed at Paddle, the webhook lost: reconciliation (Paddle's list) repairs it.
    const resumedAt = w.clock.advance(DAY);
    w.paddle.update(sub.id, resumedAt, { status: 'active' });
    const run = await reconcileBillingConnection({ client: w.t.client, path: { connectionId: paddleConn.dto.id } });
    expect(run.response.status).toBe(200);
    expect((await accessOf(w, accessId)).status).toBe('ACTIVE');
    const row = await w.t.database.db('reconciliation_runs').where({ id: run.data!.operationId }).first();
    expect(row).toMatchObject({ status: 'SUCCEEDED', examined: 1, changed: 1 });
  });

  it('customerEmail opens the transaction with that customer: found by exact email, else created once', async () => {
    const paddleConn = await newConnection(w, workspaceId, { provider: 'PADDLE' });
    w.paddle.prices.set('pri_mail', 'pro_mail');
    const mappingId = await newMapping(w, paddleConn.dto.id, proPlan, 'pro_mail', 'pri_mail');
    w.paddle.customers.set('ctm_known', 'known@example.com');
    const checkoutFor = async (customerEmail: string) => {
      const accessId = await provision(w, workspaceId, freePlan);
      const checkout = await createCheckout({
        client: w.t.client,
        path: { accessId },
        body: { billingConnectionId: paddleConn.dto.id, productMappingId: mappingId, customerEmail },
      });
      expect(checkout.response.status).toBe(201);
      return w.paddle.transactions.get(checkout.data!.providerCheckoutId)!;
    };

    expect((await checkoutFor('known@example.com')).customer_id).toBe('ctm_known');
    const first = await checkoutFor('new@example.com');
    expect(first.customer_id).toMatch(/^ctm_/);
    expect(w.paddle.customers.get(first.customer_id)).toBe('new@example.com');
    // The second checkout for that email finds the customer the first one created.
    expect((await checkoutFor('new@example.com')).customer_id).toBe(first.customer_id);
    expect([...w.paddle.customers.values()].filter((e) => e === 'new@example.com')).toHaveLength(1);
    expect(w.paddle.requests.filter((r) => r.method === 'POST' && r.path === '/customers')).toHaveLength(1);
  });
});

describe('APP_SYNC', () => {
  it('a repeated report is a no-op; an older one never overwrites a newer one', async () => {
    const syncConn = await newConnection(w, workspaceId, { kind: 'APP_SYNC', credential: false });
    w.clock.set(at(T0, 40 * DAY));
    const accessId = await provision(w, workspaceId, freePlan);
    const p1 = { start: at(w.clock.now(), HOUR), end: at(w.clock.now(), HOUR + 30 * DAY) };
    w.clock.advance(2 * HOUR);
    const report = (over: Record<string, unknown> = {}) => ({
      billingConnectionId: syncConn.dto.id,
      externalPeriodId: 'inv-1',
      planId: proPlan,
      periodStart: p1.start.toISOString(),
      periodEnd: p1.end.toISOString(),
      status: 'active' as const,
      sourceUpdatedAt: p1.start.toISOString(),
      ...over,
    });
    const first = await syncWorkspaceAccessBillingPeriod({ client: w.t.client, path: { accessId }, body: report() });
    expect(first.response.status).toBe(200);
    expect(first.data).toMatchObject({ applied: true, quotaGranted: true, status: 'active', planId: proPlan, externalPeriodId: 'inv-1' });
    expect(await accessOf(w, accessId)).toMatchObject({ status: 'ACTIVE', planId: proPlan });

    const repeat = await syncWorkspaceAccessBillingPeriod({ client: w.t.client, path: { accessId }, body: report() });
    expect(repeat.data).toMatchObject({ id: first.data!.id, applied: false, quotaGranted: true, updatedAt: first.data!.updatedAt });

    // Newer: unpaid. Then an older report (active) arrives late: ignored.
    const unpaid = await syncWorkspaceAccessBillingPeriod({
      client: w.t.client,
      path: { accessId },
      body: report({ status: 'unpaid', sourceUpdatedAt: at(p1.start, DAY).toISOString() }),
    });
    expect(unpaid.data).toMatchObject({ applied: true, status: 'unpaid' });
    expect((await accessOf(w, accessId)).status).toBe('SUSPENDED');
    const older = await syncWorkspaceAccessBillingPeriod({
      client: w.t.client,
      path: { accessId },
      body: report({ status: 'active', sourceUpdatedAt: at(p1.start, HOUR).toISOString() }),
    });
    expect(older.data).toMatchObject({ applied: false, status: 'unpaid' });
    expect((await accessOf(w, accessId)).status).toBe('SUSPENDED');

    // The next period, reported before a late report about the first: the access follows the newest.
    const p2 = { start: p1.end, end: at(p1.end, 30 * DAY) };
    w.clock.set(at(p2.start, HOUR));
    const next = await syncWorkspaceAccessBillingPeriod({
      client: w.t.client,
      path: { accessId },
      body: report({
        externalPeriodId: 'inv-2',
        periodStart: p2.start.toISOString(),
        periodEnd: p2.end.toISOString(),
        sourceUpdatedAt: p2.start.toISOString(),
      }),
    });
    expect(next.data).toMatchObject({ applied: true, quotaGranted: true });
    expect((await accessOf(w, accessId)).status).toBe('ACTIVE');
    const late = await syncWorkspaceAccessBillingPeriod({
      client: w.t.client,
      path: { accessId },
      body: report({ status: 'canceled', sourceUpdatedAt: at(p1.start, 2 * DAY).toISOString() }),
    });
    expect(late.data).toMatchObject({ applied: true, status: 'canceled' });
    expect((await accessOf(w, accessId)).status).toBe('ACTIVE');
    expect((await projectionsOf(w, accessId))[0]).toMatchObject({ externalSubscriptionId: `app-sync:${accessId}`, status: 'active' });
    expect(await grantRows(w, accessId)).toHaveLength(2);
  });
});
