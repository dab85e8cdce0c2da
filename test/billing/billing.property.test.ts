/**
 * Property: any permutation of an event stream, with any events delivered more than
 * once, yields the same projection and the same number of quota grants as the stream
 * in order. Checked on seeded random permutations, for a connection that orders
 * payloads by their source time (no credential) and one that re-reads the provider.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ExternalSubscriptionDto } from '../../generated/client/types.gen.js';
import { prng } from '../support/prng.js';
import {
  accessOf,
  at,
  billingPeriods,
  DAY,
  deliverStripe,
  grantRows,
  HOUR,
  newConnection,
  newMapping,
  newPlan,
  newWorkspace,
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

beforeAll(async () => {
  w = await startBillingWorld();
  workspaceId = await newWorkspace(w, 'property');
  freePlan = await newPlan(w, workspaceId, 'free', '100');
  const pro = await newPlan(w, workspaceId, 'pro', '1000');
  const max = await newPlan(w, workspaceId, 'max', '5000');
  w.stripe.prices.set('price_pro', 'prod_pro');
  w.stripe.prices.set('price_max', 'prod_max');
  plans = { pro, max };
});
afterAll(async () => {
  await w?.close();
});

let plans: { pro: string; max: string };

function permuteWithDuplicates<T>(items: T[], random: () => number): T[] {
  const out = [...items];
  const extra = 1 + Math.floor(random() * 4);
  for (let i = 0; i < extra; i++) out.push(items[Math.floor(random() * items.length)]!);
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

const START = at(T0, HOUR);
const P1 = { start: START, end: at(START, 30 * DAY) };
const P2 = { start: P1.end, end: at(P1.end, 30 * DAY) };
const NOW = at(P2.start, 6 * DAY);

/** One subscription's life as Stripe events: bought, upgraded, renewed unpaid, paid, set to cancel. */
function eventStream(accessId: string) {
  const sub = w.stripe.createSubscription({ price: 'price_pro', metadata: { nexus_workspace_access_id: accessId }, period: P1 });
  const events = [
    w.stripe.event('customer.subscription.created', w.stripe.snapshot(sub.id), START),
    w.stripe.event(
      'checkout.session.completed',
      { id: 'cs_x', object: 'checkout.session', mode: 'subscription', client_reference_id: accessId, subscription: sub.id },
      START,
    ),
    w.stripe.event('customer.subscription.updated', w.stripe.update(sub.id, { price: 'price_max' }), at(START, DAY)),
    w.stripe.event('customer.subscription.updated', w.stripe.update(sub.id, { status: 'past_due', period: P2 }), P2.start),
    w.stripe.event(
      'invoice.payment_failed',
      { id: 'in_1', object: 'invoice', parent: { subscription_details: { subscription: sub.id } } },
      P2.start,
    ),
    w.stripe.event('customer.subscription.updated', w.stripe.update(sub.id, { status: 'active' }), at(P2.start, HOUR)),
    w.stripe.event(
      'invoice.paid',
      { id: 'in_1', object: 'invoice', parent: { subscription_details: { subscription: sub.id } } },
      at(P2.start, HOUR),
    ),
    w.stripe.event('customer.subscription.updated', w.stripe.update(sub.id, { cancelAtPeriodEnd: true }), at(P2.start, 5 * DAY)),
  ];
  return { subId: sub.id, events };
}

function comparable(p: ExternalSubscriptionDto) {
  const { id: _id, workspaceAccessId: _a, externalSubscriptionId: _s, externalCustomerId: _c, updatedAt: _u, ...rest } = p;
  return rest;
}

async function run(conn: Conn, order: (events: { id: string; body: string }[]) => { id: string; body: string }[]) {
  w.clock.set(T0);
  const accessId = await provision(w, workspaceId, freePlan);
  const { events } = eventStream(accessId);
  w.clock.set(NOW);
  for (const event of order(events)) await deliverStripe(w, conn, event);
  const projections = await projectionsOf(w, accessId);
  expect(projections).toHaveLength(1);
  return {
    projection: comparable(projections[0]!),
    grants: (await grantRows(w, accessId)).length,
    billedPeriods: (await billingPeriods(w, accessId)).length,
    status: (await accessOf(w, accessId)).status,
  };
}

describe.each([
  ['ordered by payload source time (no credential)', false, 6],
  ['re-read from the provider', true, 3],
])('any permutation with duplicates, %s', (_label, withCredential, runs) => {
  it('gives the same projection and the same number of grants as the ordered stream', async () => {
    const conn = await newConnection(w, workspaceId, { credential: withCredential });
    await newMapping(w, conn.dto.id, plans.pro, 'prod_pro', 'price_pro');
    await newMapping(w, conn.dto.id, plans.max, 'prod_max', 'price_max');
    const baseline = await run(conn, (events) => events);
    expect(baseline.projection).toMatchObject({
      status: 'active',
      planId: plans.max,
      cancelAtPeriodEnd: true,
      currentPeriodStart: P2.start.toISOString(),
    });
    expect(baseline.grants).toBe(withCredential ? 1 : 2);
    for (let seed = 1; seed <= runs; seed++) {
      const random = prng(seed * 7919);
      const result = await run(conn, (events) => permuteWithDuplicates(events, random));
      expect(result, `seed ${seed * 7919}`).toEqual(baseline);
    }
  });
});
