/**
 * Two rules of billing's hold on an access, through HTTP (signed webhooks in, the
 * Admin API out):
 * - a billed period takes over the free (unbilled) period opened at provisioning
 *   even when it starts before it (or in the same second: Stripe's times are whole
 *   seconds), carrying the free period's usage and the calls in flight on its leases;
 * - billing lifts the suspensions it made itself, never an administrator's.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  activateWorkspaceAccess,
  getWorkspaceAccessQuota,
  listAuditLogs,
  reconcileBillingConnection,
  suspendWorkspaceAccess,
} from '../support/sdk.js';
import {
  accessOf,
  at,
  billingPeriods,
  DAY,
  deliverStripe,
  grantRows,
  HOUR,
  freeAndProWorkspace,
  provision,
  startBillingWorld,
  type BillingWorld,
  type Conn,
} from './billing-fixture.js';
import { createQuotaRepo } from '../../src/domain/quota/quota-repo.js';
import { chargeOnLease, leaseUnits, type PeriodRef } from '../support/quota-use.js';

let w: BillingWorld;
let workspaceId: string;
let freePlan: string;
let proPlan: string;
let conn: Conn;

beforeAll(async () => {
  w = await startBillingWorld();
  ({ workspaceId, freePlan, proPlan, conn } = await freeAndProWorkspace(w, 'billing-rules'));
});
afterAll(async () => {
  await w?.close();
});

async function quotaOf(accessId: string) {
  const res = await getWorkspaceAccessQuota({ client: w.t.client, path: { accessId } });
  expect(res.response.status).toBe(200);
  return res.data!;
}

/** A call in flight: a quota lease holding its bound of `units` on the access's current period at the clock's now. */
async function reserve(accessId: string, units: bigint): Promise<{ period: PeriodRef; leaseId: string; units: bigint }> {
  const { quotaPeriodId } = await quotaOf(accessId);
  const period = { id: quotaPeriodId, workspace_id: workspaceId, workspace_access_id: accessId };
  const now = w.clock.now();
  return { period, leaseId: await leaseUnits(w.t.database.db, period, units, { now, expiresAt: at(now, HOUR) }), units };
}

/** The call ends having consumed `consumedUnits`, recorded as the gateway records it; its lease is released. */
async function settle(held: { period: PeriodRef; leaseId: string; units: bigint }, consumedUnits: bigint) {
  await chargeOnLease(w.t.database.db, held.period, held.leaseId, { bound: held.units, units: consumedUnits, at: w.clock.now() });
  await createQuotaRepo(w.t.database.db).releaseLease(held.leaseId, w.clock.now());
}

/** A subscription on price_pro for the access, delivered as `customer.subscription.created`. */
async function subscribe(accessId: string, period: { start: Date; end: Date }) {
  const sub = w.stripe.createSubscription({ price: 'price_pro', metadata: { nexus_workspace_access_id: accessId }, period });
  const event = w.stripe.event('customer.subscription.created', w.stripe.snapshot(sub.id), w.clock.now());
  await deliverStripe(w, conn, event);
  const stored = await w.t.database.db('billing_webhook_events').where({ provider_event_id: event.id }).first();
  expect(stored.status).toBe('PROCESSED');
  return sub.id;
}

async function statusOf(accessId: string) {
  return (await accessOf(w, accessId)).status;
}

async function suspend(accessId: string) {
  const res = await suspendWorkspaceAccess({ client: w.t.client, path: { accessId } });
  expect(res.response.status).toBe(200);
  expect(res.data!.status).toBe('SUSPENDED');
}

async function billingActivations(accessId: string) {
  const res = await listAuditLogs({ client: w.t.client, path: { workspaceId }, query: { action: 'access.activated', limit: 100 } });
  expect(res.response.status).toBe(200);
  return res.data!.filter(
    (e) => e.resourceId === accessId && typeof e.changes.reason === 'string' && e.changes.reason.startsWith('billing:'),
  );
}

describe('a billed period starting before the free period opened at provisioning', () => {
  it('takes the free period over: the billed grant, minus what the free period consumed and still holds', async () => {
    w.clock.set('2026-11-22T07:41:21.345Z');
    const accessId = await provision(w, workspaceId, freePlan);
    const free = await quotaOf(accessId);
    expect(free).toMatchObject({ planId: freePlan, grantedUnits: '100', periodStart: '2026-11-22T07:41:21.345Z' });
    // Usage in the free period: 30 consumed, 20 held by a call still in flight.
    w.clock.advance(60_000);
    await settle(await reserve(accessId, 30n), 30n);
    const inFlight = await reserve(accessId, 20n);

    w.clock.advance(10 * 60_000);
    const billed = { start: new Date('2026-11-22T00:00:00Z'), end: new Date('2026-12-22T00:00:00Z') };
    await subscribe(accessId, billed);

    const [grant] = await grantRows(w, accessId);
    expect(grant).toMatchObject({ outcome: 'granted', quota_period_id: free.quotaPeriodId });
    const periods = await billingPeriods(w, accessId);
    expect(periods).toHaveLength(1);
    expect(periods[0].period_start.toISOString()).toBe(billed.start.toISOString());
    // The free period is the billed one now: nothing of it overlaps, nothing is left beside it.
    expect(await w.t.database.db('quota_periods').where({ workspace_access_id: accessId })).toHaveLength(1);
    expect(await quotaOf(accessId)).toMatchObject({
      quotaPeriodId: free.quotaPeriodId,
      planId: proPlan,
      periodStart: billed.start.toISOString(),
      periodEnd: billed.end.toISOString(),
      grantedUnits: '1000',
      consumedUnits: '30',
      reservedUnits: '20',
      availableUnits: '950',
    });
    expect(await accessOf(w, accessId)).toMatchObject({ status: 'ACTIVE', planId: proPlan });

    // The call in flight settles on the billed period, counted once.
    await settle(inFlight, 15n);
    expect(await quotaOf(accessId)).toMatchObject({ consumedUnits: '45', reservedUnits: '0', availableUnits: '955' });
    const usage = await w.t.database.db('usage_events').where({ workspace_access_id: accessId });
    expect(usage.map((u: any) => u.quota_period_id)).toEqual([free.quotaPeriodId, free.quotaPeriodId]);
  });

  it('takes it over too when the billed start is the provisioning second (Stripe drops the milliseconds)', async () => {
    w.clock.set('2026-11-25T09:00:00.700Z');
    const accessId = await provision(w, workspaceId, freePlan);
    w.clock.advance(2_000);
    const billed = { start: new Date('2026-11-25T09:00:00Z'), end: new Date('2026-12-25T09:00:00Z') };
    await subscribe(accessId, billed);
    expect((await grantRows(w, accessId))[0]).toMatchObject({ outcome: 'granted' });
    expect(await quotaOf(accessId)).toMatchObject({
      planId: proPlan,
      periodStart: billed.start.toISOString(),
      grantedUnits: '1000',
      consumedUnits: '0',
      availableUnits: '1000',
    });
  });

  it('still refuses a billed period that overlaps another billed one', async () => {
    w.clock.set('2026-11-27T12:00:00.250Z');
    const accessId = await provision(w, workspaceId, freePlan);
    w.clock.advance(HOUR);
    await subscribe(accessId, { start: new Date('2026-11-27T00:00:00Z'), end: new Date('2026-12-27T00:00:00Z') });
    // A second subscription on the same access, its period inside the first one's.
    w.clock.advance(HOUR);
    await subscribe(accessId, { start: new Date('2026-11-27T13:00:00Z'), end: new Date('2026-12-27T13:00:00Z') });
    expect((await grantRows(w, accessId)).map((g: any) => g.outcome)).toEqual(['granted', 'refused:period_overlap']);
    expect(await billingPeriods(w, accessId)).toHaveLength(1);
    expect(await quotaOf(accessId)).toMatchObject({ periodStart: '2026-11-27T00:00:00.000Z', grantedUnits: '1000' });
  });
});

describe('a new subscription replacing a canceled one', () => {
  /** Cancels the subscription at Stripe now (ended now) and delivers `customer.subscription.deleted`. */
  async function cancelNow(subId: string) {
    const now = w.clock.now();
    await deliverStripe(
      w,
      conn,
      w.stripe.event('customer.subscription.deleted', w.stripe.update(subId, { status: 'canceled', canceledAt: now, endedAt: now }), now),
    );
  }

  it('canceled, then subscribed again before the old period’s end: the new period is granted and the access lasts to its end', async () => {
    w.clock.set('2027-06-01T10:00:00Z');
    const accessId = await provision(w, workspaceId, freePlan);
    const first = { start: w.clock.advance(HOUR), end: new Date('2027-07-01T11:00:00Z') };
    const oldSub = await subscribe(accessId, first);
    w.clock.set('2027-06-10T11:00:00Z');
    await cancelNow(oldSub);
    expect(await statusOf(accessId)).toBe('EXPIRED');

    w.clock.set('2027-06-12T11:00:00Z');
    const second = { start: w.clock.now(), end: new Date('2027-07-12T11:00:00Z') };
    await subscribe(accessId, second);
    expect((await grantRows(w, accessId)).map((g: any) => g.outcome)).toEqual(['granted', 'granted']);
    expect(await statusOf(accessId)).toBe('ACTIVE');
    // The canceled subscription's period ends where the new one starts.
    expect((await billingPeriods(w, accessId)).map((p: any) => [p.period_start.toISOString(), p.period_end.toISOString()])).toEqual([
      [first.start.toISOString(), second.start.toISOString()],
      [second.start.toISOString(), second.end.toISOString()],
    ]);

    w.clock.set(at(first.end, DAY));
    expect(await statusOf(accessId)).toBe('ACTIVE');
    expect(await quotaOf(accessId)).toMatchObject({
      grantedUnits: '1000',
      periodStart: second.start.toISOString(),
      periodEnd: second.end.toISOString(),
    });
  });

  it('subscribed again before the old one is canceled: refused while both are live, granted by a reconciliation once the old one ended', async () => {
    w.clock.set('2027-08-01T10:00:00Z');
    const accessId = await provision(w, workspaceId, freePlan);
    const first = { start: w.clock.advance(HOUR), end: new Date('2027-09-01T11:00:00Z') };
    const oldSub = await subscribe(accessId, first);
    w.clock.set('2027-08-10T11:00:00Z');
    const second = { start: w.clock.now(), end: new Date('2027-09-10T11:00:00Z') };
    await subscribe(accessId, second);
    expect((await grantRows(w, accessId)).map((g: any) => g.outcome)).toEqual(['granted', 'refused:period_overlap']);

    w.clock.advance(60_000);
    await cancelNow(oldSub);
    const run = await reconcileBillingConnection({ client: w.t.client, path: { connectionId: conn.dto.id } });
    expect(run.response.status).toBe(200);
    expect((await grantRows(w, accessId)).map((g: any) => g.outcome)).toEqual(['granted', 'granted']);
    expect(await statusOf(accessId)).toBe('ACTIVE');

    w.clock.set(at(first.end, DAY));
    expect(await statusOf(accessId)).toBe('ACTIVE');
    expect(await quotaOf(accessId)).toMatchObject({
      grantedUnits: '1000',
      periodStart: second.start.toISOString(),
      periodEnd: second.end.toISOString(),
    });
    // Granted once: another run changes nothing.
    await reconcileBillingConnection({ client: w.t.client, path: { connectionId: conn.dto.id } });
    expect(await billingPeriods(w, accessId)).toHaveLength(2);
  });
});

describe('suspensions: billing lifts its own, never an administrator’s', () => {
  /** An access provisioned at `start` with an active subscription whose first period opens an hour later. */
  async function subscribed(start: Date) {
    w.clock.set(start);
    const accessId = await provision(w, workspaceId, freePlan);
    const paidAt = w.clock.advance(HOUR);
    const period = { start: paidAt, end: at(paidAt, 30 * DAY) };
    const subId = await subscribe(accessId, period);
    expect(await statusOf(accessId)).toBe('ACTIVE');
    return { accessId, subId, period };
  }

  /** The subscription, still active, moved to its next period, delivered at that period's start. */
  async function renewed(subId: string, period: { start: Date; end: Date }, status = 'active') {
    const next = { start: period.end, end: at(period.end, 30 * DAY) };
    w.clock.set(at(next.start, 60_000));
    await deliverStripe(
      w,
      conn,
      w.stripe.event('customer.subscription.updated', w.stripe.update(subId, { status, period: next }), w.clock.now()),
    );
    return next;
  }

  it('an administrator’s suspension survives the subscription moving to its next period; the administrator’s activate lifts it', async () => {
    const { accessId, subId, period } = await subscribed(new Date('2027-02-01T10:00:00Z'));
    w.clock.advance(DAY);
    await suspend(accessId);

    await renewed(subId, period);
    expect(await statusOf(accessId)).toBe('SUSPENDED');
    expect(await grantRows(w, accessId)).toHaveLength(2);
    await w.t.hooks.billingPasses.tick();
    expect(await statusOf(accessId)).toBe('SUSPENDED');
    expect(await billingActivations(accessId)).toEqual([]);

    const activated = await activateWorkspaceAccess({ client: w.t.client, path: { accessId } });
    expect(activated.response.status).toBe(200);
    expect(activated.data!.status).toBe('ACTIVE');
  });

  it('an access that expired while an administrator suspended it is SUSPENDED again by the billed renewal, not ACTIVE', async () => {
    const { accessId, subId, period } = await subscribed(new Date('2027-03-01T10:00:00Z'));
    w.clock.advance(DAY);
    await suspend(accessId);
    // The period ends before the renewal arrives: a read expires the access.
    w.clock.set(at(period.end, 1_000));
    expect(await statusOf(accessId)).toBe('EXPIRED');

    await renewed(subId, period);
    expect(await statusOf(accessId)).toBe('SUSPENDED');
    expect(await billingActivations(accessId)).toEqual([]);
    expect((await activateWorkspaceAccess({ client: w.t.client, path: { accessId } })).data!.status).toBe('ACTIVE');
  });

  it('a suspension billing made (unpaid) is lifted when the subscription is active again, also after the period ended meanwhile', async () => {
    const { accessId, subId, period } = await subscribed(new Date('2027-04-01T10:00:00Z'));
    w.clock.advance(DAY);
    await deliverStripe(
      w,
      conn,
      w.stripe.event('customer.subscription.updated', w.stripe.update(subId, { status: 'unpaid' }), w.clock.now()),
    );
    expect(await statusOf(accessId)).toBe('SUSPENDED');
    w.clock.advance(HOUR);
    await deliverStripe(
      w,
      conn,
      w.stripe.event('customer.subscription.updated', w.stripe.update(subId, { status: 'active' }), w.clock.now()),
    );
    expect(await statusOf(accessId)).toBe('ACTIVE');
    expect(await billingActivations(accessId)).toHaveLength(1);

    // Unpaid again; the period ends while suspended (a read expires it); then paid for the next period.
    w.clock.advance(HOUR);
    await deliverStripe(
      w,
      conn,
      w.stripe.event('customer.subscription.updated', w.stripe.update(subId, { status: 'unpaid' }), w.clock.now()),
    );
    w.clock.set(at(period.end, 1_000));
    expect(await statusOf(accessId)).toBe('EXPIRED');
    await renewed(subId, period);
    expect(await statusOf(accessId)).toBe('ACTIVE');
    expect(await billingActivations(accessId)).toHaveLength(2);
  });

  it('an administrator suspending what billing suspended makes the suspension theirs: billing’s recovery keeps it', async () => {
    const { accessId, subId } = await subscribed(new Date('2027-05-01T10:00:00Z'));
    w.clock.advance(DAY);
    await deliverStripe(
      w,
      conn,
      w.stripe.event('customer.subscription.updated', w.stripe.update(subId, { status: 'unpaid' }), w.clock.now()),
    );
    expect(await statusOf(accessId)).toBe('SUSPENDED');
    await suspend(accessId);
    w.clock.advance(HOUR);
    await deliverStripe(
      w,
      conn,
      w.stripe.event('customer.subscription.updated', w.stripe.update(subId, { status: 'active' }), w.clock.now()),
    );
    expect(await statusOf(accessId)).toBe('SUSPENDED');
    expect(await billingActivations(accessId)).toEqual([]);
  });
});
