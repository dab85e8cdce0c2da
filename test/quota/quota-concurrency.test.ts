/**
 * The quota invariants (docs/decisions.md, "The quota rule") under concurrency, on real PostgreSQL, on the
 * mechanism the gateway uses: quota leases held by several processes on one period
 * (each a meteringProcess: its leases and its call recorder, as in a Nexus process).
 * Hundreds of parallel admissions never overspend the period; calls settled on their
 * leases write exactly one USAGE event each (and an ADJUSTMENT beyond the bound);
 * released leases return what they did not use; the sweeper returns what a dead
 * process's leases held, once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createQuotaRepo } from '../../src/domain/quota/quota-repo.js';
import type { Services } from '../../src/domain/services.js';
import { newId } from '../../src/ids.js';
import { chargeOnLease, leaseUnits, meteringProcess } from '../support/quota-use.js';
import { createTestDatabase, type TestDatabase } from '../support/test-db.js';
import { provisionAccess, servicesFor } from './quota-fixture.js';

let database: TestDatabase;
let services: Services;

beforeAll(async () => {
  database = await createTestDatabase({ poolMax: 20 });
  services = servicesFor(database, { now: () => new Date() });
});
afterAll(async () => {
  await database?.drop();
});

async function periodRow(id: string) {
  return database.db('quota_periods').where({ id }).first();
}

function processes(n: number) {
  return Array.from({ length: n }, () => meteringProcess(database.db));
}

describe('admission under concurrency', () => {
  it('one process: 300 parallel calls bounded at 7 units against 1000 granted: exactly 142 admitted, none overspends', async () => {
    const { period } = await provisionAccess(services, { quotaUnits: '1000' }, 'conc-1');
    const [p] = processes(1);
    const results = await Promise.all(Array.from({ length: 300 }, () => p!.admit(period, 7n)));
    const admitted = results.filter((r) => r.ok);
    expect(admitted.length).toBe(Math.floor(1000 / 7));
    for (const r of results) if (!r.ok) expect(r.available).toBeLessThan(7n);
    const row = await periodRow(period.id);
    expect(row.reserved_units + row.consumed_units).toBeLessThanOrEqual(row.granted_units);
    for (const r of admitted) if (r.ok) p!.finish(period, r.admission, null);
    await p!.drain();
    expect(await periodRow(period.id)).toMatchObject({ reserved_units: 0n, consumed_units: 0n });
    p!.close();
  });

  it('three processes: 600 parallel calls never hold more than granted, and every admitted bound is held', async () => {
    const { period } = await provisionAccess(services, { quotaUnits: '1000' }, 'conc-3p');
    const ps = processes(3);
    const results = await Promise.all(Array.from({ length: 600 }, (_v, i) => ps[i % 3]!.admit(period, 7n)));
    const admitted = results.filter((r) => r.ok).length;
    const row = await periodRow(period.id);
    // What is admitted is held by some lease: the period's reserved units cover it, and never exceed the grant.
    expect(BigInt(admitted) * 7n).toBeLessThanOrEqual(row.reserved_units);
    expect(row.reserved_units + row.consumed_units).toBeLessThanOrEqual(row.granted_units);
    // Leases are carved per process: at most a call's bound (less one unit) is stranded in each.
    expect(admitted).toBeGreaterThanOrEqual(Math.floor(1000 / 7) - 3);
    const leases = await database.db('quota_leases').where({ quota_period_id: period.id });
    expect(leases.every((l) => l.status === 'HELD')).toBe(true);
    expect(leases.length).toBeLessThanOrEqual(3);
    for (const p of ps) p.close();
  });
});

describe('settlement under concurrency', () => {
  it('250 calls on two processes settle at once: one USAGE event each, adjustments for overuse, all returned on release', async () => {
    const { period } = await provisionAccess(services, { quotaUnits: '100000' }, 'conc-2');
    const ps = processes(2);
    const admissions = await Promise.all(Array.from({ length: 250 }, (_v, i) => ps[i % 2]!.admit(period, 100n)));
    expect(admissions.every((r) => r.ok)).toBe(true);
    expect((await periodRow(period.id)).reserved_units).toBeGreaterThanOrEqual(25_000n);

    // Call i consumes i % 150 units: some beyond their bound of 100 (adjustments).
    const invocationIds = admissions.map((r, i) => (r.ok ? ps[i % 2]!.finish(period, r.admission, BigInt(i % 150)) : ''));
    // An admission is settled once.
    const first = admissions[0]!;
    if (first.ok) expect(() => ps[0]!.leases.settle(first.admission, 1n)).toThrow(/settled once/);
    await Promise.all(ps.map((p) => p.drain()));

    const row = await periodRow(period.id);
    expect(row.reserved_units).toBe(0n);
    const expectedConsumed = admissions.reduce((sum, _r, i) => sum + BigInt(i % 150), 0n);
    expect(row.consumed_units).toBe(expectedConsumed);

    const events = await database.db('usage_events').where({ quota_period_id: period.id });
    const usage = events.filter((e) => e.kind === 'USAGE');
    expect(usage.length).toBe(250);
    expect(new Set(usage.map((e) => e.invocation_id))).toEqual(new Set(invocationIds));
    const adjustments = events.filter((e) => e.kind === 'ADJUSTMENT');
    expect(adjustments.length).toBe(admissions.filter((_r, i) => i % 150 > 100).length);
    expect(events.reduce((sum, e) => sum + BigInt(e.units), 0n)).toBe(expectedConsumed);
    const statuses = await database.db('quota_leases').where({ quota_period_id: period.id }).distinct('status');
    expect(statuses.map((s) => s.status)).toEqual(['RELEASED']);
    for (const p of ps) p.close();
  });

  it('mixed traffic on three processes keeps consumed + reserved within granted at every step', async () => {
    const { period } = await provisionAccess(services, { quotaUnits: '5000' }, 'conc-mixed');
    const ps = processes(3);
    let sampling = true;
    const samples: { reserved_units: bigint; consumed_units: bigint; granted_units: bigint }[] = [];
    const sampler = (async () => {
      while (sampling) {
        samples.push(await periodRow(period.id));
        await new Promise((r) => setTimeout(r, 2));
      }
    })();
    const work = Array.from({ length: 200 }, async (_v, i): Promise<bigint> => {
      const p = ps[i % 3]!;
      const r = await p.admit(period, 50n);
      if (!r.ok) return 0n;
      await new Promise((resolve) => setTimeout(resolve, i % 7));
      // A third end without a charge (refused upstream, say), the rest use 40 of their 50.
      const units = i % 3 === 0 ? null : 40n;
      p.finish(period, r.admission, units);
      return units ?? 0n;
    });
    const consumed = (await Promise.all(work)).reduce((a, b) => a + b, 0n);
    await Promise.all(ps.map((p) => p.drain()));
    sampling = false;
    await sampler;
    expect(samples.length).toBeGreaterThan(0);
    for (const s of samples) expect(s.reserved_units + s.consumed_units).toBeLessThanOrEqual(s.granted_units);
    const row = await periodRow(period.id);
    expect(row.reserved_units).toBe(0n);
    expect(row.consumed_units).toBe(consumed);
    expect(row.consumed_units).toBeLessThanOrEqual(row.granted_units);
    for (const p of ps) p.close();
  });
});

describe('refusals, the sweeper and immutability', () => {
  it('refuses a call beyond what the period has, and says what it has', async () => {
    const { period } = await provisionAccess(services, { quotaUnits: '10' }, 'small');
    const [p] = processes(1);
    expect(await p!.admit(period, 11n)).toMatchObject({ ok: false, available: 10n, periodOver: false });
    const ten = await p!.admit(period, 10n);
    expect(ten).toMatchObject({ ok: true, remaining: 0n });
    expect(await p!.admit(period, 1n)).toMatchObject({ ok: false, available: 0n });
    if (ten.ok) p!.finish(period, ten.admission, 10n);
    await p!.drain();
    expect(await services.quota.snapshot(period.workspace_access_id, new Date())).toMatchObject({
      consumedUnits: 10n,
      reservedUnits: 0n,
      availableUnits: 0n,
    });
    p!.close();
  });

  it('the sweeper expires leases past their TTL and returns what they held, once; a call recorded later is charged once, directly', async () => {
    const { period } = await provisionAccess(services, { quotaUnits: '1000' }, 'sweep');
    const now = new Date();
    const past = { now, expiresAt: new Date(now.getTime() - 1000) };
    const stale = [
      await leaseUnits(database.db, period, 100n, past),
      await leaseUnits(database.db, period, 100n, past),
      await leaseUnits(database.db, period, 100n, past),
    ];
    const live = await leaseUnits(database.db, period, 50n, { now, expiresAt: new Date(now.getTime() + 60_000) });
    // The dead processes' calls used some of their leases before they died.
    await chargeOnLease(database.db, period, stale[0]!, { bound: 30n, units: 30n });
    const counts = await Promise.all([services.quota.sweepExpired(new Date()), services.quota.sweepExpired(new Date())]);
    expect(counts[0].leases + counts[1].leases).toBe(3);
    expect(await periodRow(period.id)).toMatchObject({ reserved_units: 50n, consumed_units: 30n });
    // A call of that process recorded after its lease expired (its process was cut off, not dead): it takes
    // nothing from the lease, whose units went back, and is charged to the period directly.
    const late = await chargeOnLease(database.db, period, stale[1]!, { bound: 10n, units: 10n });
    expect(await database.db('invocations').where({ id: late }).first()).toMatchObject({ quota_units: 10n });
    expect(await database.db('usage_events').where({ invocation_id: late })).toMatchObject([{ kind: 'USAGE', units: 10n }]);
    expect(await periodRow(period.id)).toMatchObject({ reserved_units: 50n, consumed_units: 40n });
    expect(await services.quota.sweepExpired(new Date())).toEqual({ leases: 0, calls: 0 });
    await createQuotaRepo(database.db).releaseLease(live, new Date());
    expect(await periodRow(period.id)).toMatchObject({ reserved_units: 0n, consumed_units: 40n });
  });

  it('usage events are append-only and a published strategy cannot be changed, even in SQL', async () => {
    const { period, strategy } = await provisionAccess(services, { quotaUnits: '1000' }, 'immutable');
    const leaseId = await leaseUnits(database.db, period, 1n, { now: new Date(), expiresAt: new Date(Date.now() + 60_000) });
    const invocationId = await chargeOnLease(database.db, period, leaseId, { bound: 1n, units: 1n });
    await expect(database.db('usage_events').where({ invocation_id: invocationId }).update({ units: 0 })).rejects.toThrow(/append-only/);
    await expect(database.db('usage_events').where({ invocation_id: invocationId }).del()).rejects.toThrow(/append-only/);
    await expect(database.db('quota_strategies').where({ id: strategy.id }).update({ quota_units: 1 })).rejects.toThrow(/immutable/);
  });

  // usage_events is partitioned by month (docs/operations.md): its unique index holds the event's time, which a call's
  // record derives from the call (the same on every replay), and the invocation's own key (id, started_at) is what
  // keeps a call from being recorded, and charged, twice (record-sql.ts: only newly recorded calls are settled).
  it('a second USAGE event of an invocation at the same time is refused by the database, whatever lease it names', async () => {
    const { access, period } = await provisionAccess(services, { quotaUnits: '1000' }, 'one-per-invocation');
    const at = new Date();
    const event = (kind: 'USAGE' | 'ADJUSTMENT', invocationId: string) => ({
      id: newId(),
      workspace_id: access.workspace_id,
      workspace_access_id: access.id,
      quota_period_id: period.id,
      lease_id: newId(),
      invocation_id: invocationId,
      kind,
      units: 1,
      created_at: at,
    });
    const invocationId = newId();
    await database.db('usage_events').insert([event('USAGE', invocationId), event('ADJUSTMENT', invocationId)]);
    // The month's copy of usage_events_one_per_invocation refuses it (a partition's index is named after its columns).
    await expect(database.db('usage_events').insert(event('USAGE', invocationId))).rejects.toThrow(
      /duplicate key value violates unique constraint "usage_events_\w*invocation_id_kind_created_at/,
    );
  });
});
