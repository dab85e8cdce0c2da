/**
 * The plan-change carry (docs/decisions.md "Changing plan"): a split charges the
 * new part for what the old part used beyond its share, holds included; what
 * those holds give back later (a lease released or expired, with what its calls
 * settled below their bounds) returns to the new part, never more than it was charged, never below
 * what the old part still uses. Through the domain with a fixed clock, so the
 * grants are exact; the HTTP scenarios are in test/gateway/gateway.leases.test.ts.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createQuotaRepo } from '../../src/domain/quota/quota-repo.js';
import { fromCreateStrategyDto } from '../../src/handlers/plans/plan-mapper.js';
import { chargeOnLease, leaseUnits, useUnits, type PeriodRef } from '../support/quota-use.js';
import { createTestDatabase, type TestDatabase } from '../support/test-db.js';
import { actor, provisionAccess, servicesFor } from './quota-fixture.js';

const DAY = 86_400_000;
let database: TestDatabase;
let services: ReturnType<typeof servicesFor>;
let start: Date;
let current: Date;

beforeAll(async () => {
  database = await createTestDatabase();
  services = servicesFor(database, { now: () => new Date(current.getTime()) });
});
afterAll(async () => {
  await database?.drop();
});
beforeEach(() => {
  // Whole seconds: the periods' timestamps keep milliseconds anyway.
  start = new Date(Math.floor(Date.now() / 1000) * 1000);
  current = start;
});

let seq = 0;

/** An access on a plan of `quotaUnits` (30-day-ish month from now) and another plan of `otherUnits` in its workspace. */
async function accessWithPlans(quotaUnits: `${bigint}`, otherUnits: `${bigint}`) {
  const a = await provisionAccess(services, { quotaUnits }, `carry-${++seq}`);
  const s = await services.plans.createStrategy(
    actor,
    a.workspace.id,
    fromCreateStrategyDto({
      key: 'other',
      resetInterval: 'MONTH',
      quotaUnits: otherUnits,
      inputMultiplierPpm: '1000000',
      outputMultiplierPpm: '1000000',
      cachedInputMultiplierPpm: '1000000',
      maxOutputTokens: 1000,
    }),
  );
  await services.plans.publishStrategy(actor, s.id);
  const other = await services.plans.createPlan(actor, a.workspace.id, { key: 'other', name: 'Other', billingInterval: 'MONTH' });
  await services.plans.bind(actor, other.id, { strategyId: s.id, effectiveFrom: new Date(0) });
  await services.plans.publishPlan(actor, other.id);
  return { ...a, other };
}

const partsOf = (accessId: string) => database.db('quota_periods').where({ workspace_access_id: accessId }).orderBy('period_start');
const grants = async (accessId: string) => (await partsOf(accessId)).map((p) => BigInt(p.granted_units));

/** A lease of exactly `units` on the period at the current time, as a gateway process holds one. */
async function hold(period: PeriodRef, units: bigint) {
  return leaseUnits(database.db, period, units, { now: current, expiresAt: new Date(current.getTime() + 60_000) });
}

const release = (leaseId: string) => createQuotaRepo(database.db).releaseLease(leaseId, current);

async function expectNoOverspend(accessId: string) {
  for (const p of await partsOf(accessId)) {
    expect(BigInt(p.consumed_units) + BigInt(p.reserved_units)).toBeLessThanOrEqual(BigInt(p.granted_units));
  }
}

describe('the plan-change carry', () => {
  it('a lease the sweeper expires after the change gives its units back to the new part', async () => {
    const { access, period, other } = await accessWithPlans('3000', '9000');
    const leaseId = await hold(period, 900n);
    current = new Date(start.getTime() + DAY);
    await services.accesses.changePlan(actor, access.id, { planId: other.id });
    const [oldAtChange, nextAtChange] = await partsOf(access.id);
    expect(BigInt(oldAtChange.granted_units)).toBe(900n);
    expect(BigInt(oldAtChange.carried_units)).toBe(900n - BigInt(oldAtChange.share_units));
    // Its process died: the sweeper returns what it held, and the carry with it.
    current = new Date(current.getTime() + 120_000);
    expect(await services.quota.sweepExpired(current)).toEqual({ leases: 1, calls: 0 });
    expect((await database.db('quota_leases').where({ id: leaseId }).first()).status).toBe('EXPIRED');
    const [old, next] = await partsOf(access.id);
    expect(BigInt(old.granted_units)).toBe(BigInt(old.share_units));
    expect(BigInt(old.carried_units)).toBe(0n);
    expect(BigInt(next.granted_units)).toBe(BigInt(nextAtChange.granted_units) + BigInt(oldAtChange.carried_units));
    await expectNoOverspend(access.id);
  });

  it('a downgrade: only what the new part was charged comes back, nothing is minted', async () => {
    // 3000 over the period, 300 on the other plan; a lease of 2500 held at a third of the period.
    const { access, period, other } = await accessWithPlans('3000', '300');
    const third = (new Date(period.period_end).getTime() - start.getTime()) / 3;
    const leaseId = await hold(period, 2500n);
    current = new Date(start.getTime() + third);
    await services.accesses.changePlan(actor, access.id, { planId: other.id });
    const [oldAtChange, nextAtChange] = await partsOf(access.id);
    // Old share 1000; 1500 used beyond it, but the new part had only its share (200 = 300 x 2/3) to be charged.
    expect(BigInt(oldAtChange.share_units)).toBe(1000n);
    expect([BigInt(oldAtChange.granted_units), BigInt(nextAtChange.granted_units), BigInt(oldAtChange.carried_units)]).toEqual([
      2500n,
      0n,
      200n,
    ]);
    await release(leaseId);
    // As if nothing had been held: the new part gets its 200; the old part gives up no more than that.
    expect(await grants(access.id)).toEqual([2300n, 200n]);
    await release(leaseId);
    expect(await grants(access.id)).toEqual([2300n, 200n]);
    await expectNoOverspend(access.id);
  });

  it('a call settled below its bound on the old part gives back the difference; what it consumed stays carried', async () => {
    const { access, period, other } = await accessWithPlans('3000', '9000');
    const leaseId = await hold(period, 600n);
    current = new Date(start.getTime() + 1000);
    await services.accesses.changePlan(actor, access.id, { planId: other.id });
    const [, nextAtChange] = await partsOf(access.id);
    // The call consumed 250 of its bound of 600; its lease is then released.
    await chargeOnLease(database.db, period, leaseId, { bound: 600n, units: 250n, at: current });
    await release(leaseId);
    const [old, next] = await partsOf(access.id);
    expect([BigInt(old.granted_units), BigInt(old.consumed_units), BigInt(old.reserved_units)]).toEqual([250n, 250n, 0n]);
    expect(BigInt(next.granted_units)).toBe(BigInt(nextAtChange.granted_units) + 350n);
    await expectNoOverspend(access.id);
  });

  it('switching back and forth after using more than a share never gives that use back', async () => {
    // 3000 on the plan, 9000 on the other; 2000 used at once, then two switches a day apart.
    const { access, period, plan, other } = await accessWithPlans('3000', '9000');
    await useUnits(database.db, period, 2000n, current);
    const total = new Date(period.period_end).getTime() - start.getTime();
    current = new Date(start.getTime() + DAY);
    await services.accesses.changePlan(actor, access.id, { planId: other.id });
    current = new Date(start.getTime() + 2 * DAY);
    await services.accesses.changePlan(actor, access.id, { planId: plan.id });
    const parts = await partsOf(access.id);
    expect(parts).toHaveLength(3);
    const live = parts[2]!;
    // The live part: the plan's share of what is left of the period, less the 2000 used, less nothing more (its own
    // share of the first two days went to the parts that had them: 3000 x 1/n and 9000 x 1/n).
    const share = (units: number, from: number, to: number) => Math.floor((units * (to - from)) / total);
    const owed = 2000 - share(3000, 0, DAY) - share(9000, DAY, 2 * DAY);
    const expected = BigInt(Math.max(0, share(3000, 2 * DAY, total) - owed));
    expect(BigInt(live.granted_units) - BigInt(live.consumed_units) - BigInt(live.reserved_units)).toBeLessThanOrEqual(expected + 1n);
    expect(BigInt(live.granted_units)).toBeGreaterThanOrEqual(expected - 1n);
    // In all, the three parts grant no more than was used plus what the live part still has.
    const granted = parts.reduce((sum, p) => sum + BigInt(p.granted_units), 0n);
    const consumed = parts.reduce((sum, p) => sum + BigInt(p.consumed_units), 0n);
    expect(granted - consumed).toBe(BigInt(live.granted_units) - BigInt(live.consumed_units));
    await expectNoOverspend(access.id);
  });

  it('a change to the plan a later change already named still applies to the period running now', async () => {
    const { access, plan, other } = await accessWithPlans('3000', '9000');
    // Scheduled for day 2: the access names the other plan at once, the period up to day 2 keeps the first.
    await services.accesses.changePlan(actor, access.id, { planId: other.id, effectiveAt: new Date(start.getTime() + 2 * DAY) });
    current = new Date(start.getTime() + DAY);
    await services.accesses.changePlan(actor, access.id, { planId: other.id });
    const parts = await partsOf(access.id);
    expect(parts.map((p) => [p.plan_id, new Date(p.period_start).getTime() - start.getTime()])).toEqual([
      [plan.id, 0],
      [other.id, DAY],
      [other.id, 2 * DAY],
    ]);
    await expectNoOverspend(access.id);
  });

  it('switching back and forth with a lease held throughout mints nothing: the live part gets what it would with no lease', async () => {
    const withLease = await accessWithPlans('3000', '9000');
    const without = await accessWithPlans('3000', '9000');
    const leaseId = await hold(withLease.period, 500n);
    for (const { access, other, plan } of [withLease, without]) {
      current = new Date(start.getTime() + DAY);
      await services.accesses.changePlan(actor, access.id, { planId: other.id });
      current = new Date(start.getTime() + 2 * DAY);
      await services.accesses.changePlan(actor, access.id, { planId: plan.id });
    }
    const [p1AtEnd, p2AtEnd] = await partsOf(withLease.access.id);
    await release(leaseId);
    const [p1, p2, p3] = await partsOf(withLease.access.id);
    const reference = await grants(without.access.id);
    expect(reference).toHaveLength(3);
    // The part running now (the one calls can still use) gets exactly what it would with no lease.
    expect(BigInt(p3.granted_units)).toBe(reference[2]!);
    // The lease's units went back to the part that was charged for them, and on to the live part as far as
    // that part had been charged for them in turn; the first part keeps its share.
    expect(BigInt(p1.granted_units)).toBe(BigInt(p1.share_units));
    // The middle part passed on what its own split had charged the live part for that lease.
    expect(BigInt(p2.granted_units) - BigInt(p2AtEnd.granted_units)).toBe(BigInt(p1AtEnd.carried_units) - BigInt(p2AtEnd.carried_units));
    expect(BigInt(p1AtEnd.granted_units) - BigInt(p1.granted_units)).toBe(BigInt(p1AtEnd.carried_units));
    await expectNoOverspend(withLease.access.id);
  });
});
