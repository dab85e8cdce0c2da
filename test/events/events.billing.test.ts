/**
 * The events billing and the expiry sweep cause, through HTTP: signed Stripe and Paddle webhooks (the billing
 * tests' fakes and fixture) change a subscription, and a receiver verifying with `standardwebhooks` gets
 * billing.subscription_changed once per change of its status or plan, and access.status_changed once per change
 * of the access's status, with the reason that caused it (billing, expiry). The billing world's clock is movable;
 * it is set to the real time, since receivers check a delivery's timestamp against their own clock.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { AccessStatusChangedEventData, BillingSubscriptionChangedEventData } from '../../generated/client/types.gen.js';
import { createCheckout } from '../support/sdk.js';
import {
  accessOf,
  at,
  DAY,
  deliverPaddle,
  deliverStripe,
  freeAndProWorkspace,
  newConnection,
  newMapping,
  newPlan,
  provision,
  startBillingWorld,
  type BillingWorld,
} from '../billing/billing-fixture.js';
import { acceptedOf, endpointFor, startReceiver, type Receiver } from './receiver.js';

const FAST = {
  NEXUS_EVENTS_POLL_MS: '20',
  NEXUS_EVENTS_RETRY_SCHEDULE_MS: '0,100,100,100,100,100,100,100',
  NEXUS_EVENTS_TIMEOUT_MS: '500',
};

let w: BillingWorld;
const receivers: Receiver[] = [];

beforeAll(async () => {
  w = await startBillingWorld(FAST);
});
afterEach(async () => {
  for (const r of receivers.splice(0)) await r.close();
});
afterAll(async () => {
  await w?.close();
});

async function receiver(): Promise<Receiver> {
  const r = await startReceiver();
  receivers.push(r);
  return r;
}

const settle = (ms = 300) => new Promise((resolve) => setTimeout(resolve, ms));
/** The clock a second on: each provider event is newer than the last. */
const tick = () => w.clock.advance(1000);
const dataOf = (r: Receiver, type: string) =>
  r
    .accepted()
    .filter((d) => d.verified!.type === type)
    .map((d) => d.verified!.data);

describe('billing.subscription_changed and access.status_changed (billing)', () => {
  it('Stripe: once per change of the subscription’s status or plan, and of the access’s status; nothing for a repeat', async () => {
    w.clock.set(new Date());
    const { workspaceId, freePlan, conn } = await freeAndProWorkspace(w, 'events-stripe');
    const maxPlan = await newPlan(w, workspaceId, 'max', '5000');
    w.stripe.prices.set('price_max', 'prod_max');
    await newMapping(w, conn.dto.id, maxPlan, 'prod_max', 'price_max');
    const accessId = await provision(w, workspaceId, freePlan);
    const r = await receiver();
    await endpointFor(w.t, workspaceId, r, ['billing.subscription_changed', 'access.status_changed']);
    // The payloads as the catalogue (the contract's *EventData schemas) has them.
    const change = (from: string | null, to: string): BillingSubscriptionChangedEventData => ({
      workspaceAccessId: accessId,
      billingConnectionId: conn.dto.id,
      externalSubscriptionId: sub.id,
      from,
      to,
    });
    const status = (from: AccessStatusChangedEventData['from'], to: AccessStatusChangedEventData['to']): AccessStatusChangedEventData => ({
      workspaceAccessId: accessId,
      from,
      to,
      reason: 'billing',
    });

    const start = tick();
    const sub = w.stripe.createSubscription({
      price: 'price_pro',
      metadata: { nexus_workspace_access_id: accessId },
      period: { start, end: at(start, 30 * DAY) },
    });
    const created = w.stripe.event('customer.subscription.created', w.stripe.snapshot(sub.id), start);
    await deliverStripe(w, conn, created);
    // The same event delivered again, and an update that changes nothing: no event.
    await deliverStripe(w, conn, created);
    await deliverStripe(w, conn, w.stripe.event('customer.subscription.updated', w.stripe.snapshot(sub.id), tick()));
    await acceptedOf(r, 'billing.subscription_changed', 1);

    await deliverStripe(w, conn, w.stripe.event('customer.subscription.updated', w.stripe.update(sub.id, { status: 'unpaid' }), tick()));
    expect((await accessOf(w, accessId)).status).toBe('SUSPENDED');
    await acceptedOf(r, 'billing.subscription_changed', 2);
    await deliverStripe(w, conn, w.stripe.event('customer.subscription.updated', w.stripe.update(sub.id, { status: 'active' }), tick()));
    expect((await accessOf(w, accessId)).status).toBe('ACTIVE');
    await acceptedOf(r, 'billing.subscription_changed', 3);
    // A change of plan (price) alone: from and to are the same status.
    await deliverStripe(w, conn, w.stripe.event('customer.subscription.updated', w.stripe.update(sub.id, { price: 'price_max' }), tick()));
    expect((await accessOf(w, accessId)).planId).toBe(maxPlan);
    await acceptedOf(r, 'billing.subscription_changed', 4);
    const endedAt = tick();
    w.stripe.update(sub.id, { status: 'canceled', canceledAt: endedAt, endedAt });
    await deliverStripe(w, conn, w.stripe.event('customer.subscription.deleted', w.stripe.snapshot(sub.id), endedAt));
    expect((await accessOf(w, accessId)).status).toBe('EXPIRED');
    await acceptedOf(r, 'billing.subscription_changed', 5);
    await acceptedOf(r, 'access.status_changed', 3);

    await settle();
    expect(dataOf(r, 'billing.subscription_changed')).toEqual([
      change(null, 'active'),
      change('active', 'unpaid'),
      change('unpaid', 'active'),
      change('active', 'active'),
      change('active', 'canceled'),
    ]);
    expect(dataOf(r, 'access.status_changed')).toEqual([
      status('ACTIVE', 'SUSPENDED'),
      status('SUSPENDED', 'ACTIVE'),
      status('ACTIVE', 'EXPIRED'),
    ]);
    // Every delivery carried its event's own id, once.
    const ids = r.accepted().map((d) => d.id);
    expect(new Set(ids).size).toBe(8);
    expect(r.deliveries).toHaveLength(8);
  });

  it('Paddle: once per change of the subscription’s status, and of the access’s status; nothing for a repeat', async () => {
    w.clock.set(new Date());
    const { workspaceId, freePlan, proPlan } = await freeAndProWorkspace(w, 'events-paddle');
    const conn = await newConnection(w, workspaceId, { provider: 'PADDLE' });
    w.paddle.prices.set('pri_pro', 'pro_pro');
    const mappingId = await newMapping(w, conn.dto.id, proPlan, 'pro_pro', 'pri_pro');
    const accessId = await provision(w, workspaceId, freePlan);
    const r = await receiver();
    await endpointFor(w.t, workspaceId, r, ['billing.subscription_changed', 'access.status_changed']);

    const checkout = await createCheckout({
      client: w.t.client,
      path: { accessId },
      body: { billingConnectionId: conn.dto.id, productMappingId: mappingId },
      headers: { 'Idempotency-Key': `events-${accessId}` },
    });
    expect(checkout.response.status).toBe(201);
    const paidAt = tick();
    const sub = w.paddle.completeTransaction(checkout.data!.providerCheckoutId, { start: paidAt, end: at(paidAt, 30 * DAY) }, paidAt);
    const created = w.paddle.event('subscription.created', sub, paidAt);
    await deliverPaddle(w, conn, created);
    await deliverPaddle(w, conn, created);
    expect(await accessOf(w, accessId)).toMatchObject({ status: 'ACTIVE', planId: proPlan });
    await acceptedOf(r, 'billing.subscription_changed', 1);

    const pausedAt = tick();
    await deliverPaddle(w, conn, w.paddle.event('subscription.paused', w.paddle.update(sub.id, pausedAt, { status: 'paused' }), pausedAt));
    expect((await accessOf(w, accessId)).status).toBe('SUSPENDED');
    await acceptedOf(r, 'billing.subscription_changed', 2);
    const resumedAt = tick();
    const resumed = w.paddle.update(sub.id, resumedAt, { status: 'active' });
    await deliverPaddle(w, conn, w.paddle.event('subscription.resumed', resumed, resumedAt));
    expect((await accessOf(w, accessId)).status).toBe('ACTIVE');
    // The same state again, in another event: no change, no event.
    await deliverPaddle(w, conn, w.paddle.event('subscription.updated', resumed, resumedAt));
    await acceptedOf(r, 'billing.subscription_changed', 3);
    await acceptedOf(r, 'access.status_changed', 2);

    await settle();
    const change = (from: string | null, to: string): BillingSubscriptionChangedEventData => ({
      workspaceAccessId: accessId,
      billingConnectionId: conn.dto.id,
      externalSubscriptionId: sub.id,
      from,
      to,
    });
    expect(dataOf(r, 'billing.subscription_changed')).toEqual([
      change(null, 'active'),
      change('active', 'paused'),
      change('paused', 'active'),
    ]);
    expect(dataOf(r, 'access.status_changed')).toEqual([
      { workspaceAccessId: accessId, from: 'ACTIVE', to: 'SUSPENDED', reason: 'billing' },
      { workspaceAccessId: accessId, from: 'SUSPENDED', to: 'ACTIVE', reason: 'billing' },
    ]);
    expect(r.deliveries).toHaveLength(5);
  });
});

describe('access.status_changed (expiry)', () => {
  it('once, when the expiry sweep finds the access’s last period ended', async () => {
    // Provisioned 40 days ago on a monthly plan: its one period has ended.
    w.clock.set(at(new Date(), -40 * DAY));
    const { workspaceId, freePlan } = await freeAndProWorkspace(w, 'events-expiry');
    const accessId = await provision(w, workspaceId, freePlan);
    w.clock.set(new Date());
    const r = await receiver();
    await endpointFor(w.t, workspaceId, r, ['access.status_changed']);
    await w.t.nexus.services.accesses.expireDue(workspaceId);
    await w.t.nexus.services.accesses.expireDue(workspaceId);
    expect((await accessOf(w, accessId)).status).toBe('EXPIRED');
    const [expired] = await acceptedOf(r, 'access.status_changed', 1);
    expect(expired!.verified!.data).toEqual({ workspaceAccessId: accessId, from: 'ACTIVE', to: 'EXPIRED', reason: 'expiry' });
    await settle();
    expect(r.deliveries).toHaveLength(1);
  });
});
