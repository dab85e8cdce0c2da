/**
 * The quota invariants of DESIGN.md under concurrency, on real PostgreSQL:
 * hundreds of parallel reservations against one period never overspend it;
 * settling returns reserved to zero, writes exactly one USAGE event per
 * settlement, and a second settle of the same reservation is a no-op.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/ids.js';
import type { Services } from '../../src/domain/services.js';
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

describe('reserve under concurrency', () => {
  it('300 parallel reservations of 7 units against 1000 granted: exactly 142 succeed, none overspends', async () => {
    const { access, period } = await provisionAccess(services, { quotaUnits: '1000' }, 'conc-1');
    const expiresAt = new Date(Date.now() + 60_000);
    const ids = Array.from({ length: 300 }, () => newId());
    const results = await Promise.all(
      ids.map((reservationId, i) =>
        services.quota.reserve({
          reservationId,
          workspaceId: access.workspace_id,
          accessId: access.id,
          periodId: period.id,
          units: 7n,
          requestId: `req-${i}`,
          expiresAt,
        }),
      ),
    );
    const granted = results.filter((r) => r.ok);
    expect(granted.length).toBe(Math.floor(1000 / 7));
    const refused = results.filter((r) => !r.ok);
    for (const r of refused) if (!r.ok) expect(r.available).toBeLessThan(7n);
    const row = await periodRow(period.id);
    expect(row.reserved_units).toBe(7n * BigInt(granted.length));
    expect(row.reserved_units + row.consumed_units).toBeLessThanOrEqual(row.granted_units);
    const held = await database.db('quota_reservations').where({ quota_period_id: period.id, status: 'HELD' }).count('* as n');
    expect(Number(held[0]!.n)).toBe(granted.length);
    // Every successful reservation's "remaining" is a distinct, non-negative value.
    const remaining = granted.map((r) => (r.ok ? r.remaining : -1n));
    expect(new Set(remaining.map(String)).size).toBe(granted.length);
    expect(remaining.every((r) => r >= 0n)).toBe(true);
  });

  it('settles hundreds in parallel (twice each): reserved back to 0, one USAGE event per settlement, adjustments for overuse', async () => {
    const { access, period } = await provisionAccess(services, { quotaUnits: '100000' }, 'conc-2');
    const expiresAt = new Date(Date.now() + 60_000);
    const ids = Array.from({ length: 250 }, () => newId());
    const reserved = await Promise.all(
      ids.map((reservationId, i) =>
        services.quota.reserve({
          reservationId,
          workspaceId: access.workspace_id,
          accessId: access.id,
          periodId: period.id,
          units: 100n,
          requestId: `r-${i}`,
          expiresAt,
        }),
      ),
    );
    expect(reserved.every((r) => r.ok)).toBe(true);
    expect((await periodRow(period.id)).reserved_units).toBe(25_000n);

    // Reservation i consumes i units (some beyond the 100 held: adjustments); every one settled twice at once.
    const settle = (reservationId: string, i: number) =>
      services.quota.settle({
        reservationId,
        consumedUnits: BigInt(i % 150),
        inputTokens: BigInt(i),
        cachedInputTokens: 0n,
        outputTokens: 1n,
        model: 'gpt-test',
        invocationId: null,
      });
    const outcomes = await Promise.all(ids.flatMap((id, i) => [settle(id, i), settle(id, i)]));
    const applied = outcomes.filter((o) => o !== null);
    expect(applied.length).toBe(ids.length);

    const row = await periodRow(period.id);
    expect(row.reserved_units).toBe(0n);
    const expectedConsumed = ids.reduce((sum, _id, i) => sum + BigInt(i % 150), 0n);
    expect(row.consumed_units).toBe(expectedConsumed);

    const events = await database.db('usage_events').where({ quota_period_id: period.id });
    const usage = events.filter((e) => e.kind === 'USAGE');
    expect(usage.length).toBe(ids.length);
    expect(new Set(usage.map((e) => e.reservation_id)).size).toBe(ids.length);
    const overusers = ids.filter((_id, i) => i % 150 > 100).length;
    const adjustments = events.filter((e) => e.kind === 'ADJUSTMENT');
    expect(adjustments.length).toBe(overusers);
    const eventUnits = events.reduce((sum, e) => sum + BigInt(e.units), 0n);
    expect(eventUnits).toBe(expectedConsumed);
    const statuses = await database.db('quota_reservations').where({ quota_period_id: period.id }).distinct('status');
    expect(statuses.map((s) => s.status)).toEqual(['SETTLED']);
  });

  it('mixed reserve/settle/release traffic keeps consumed + reserved within granted at every step', async () => {
    const { access, period } = await provisionAccess(services, { quotaUnits: '5000' }, 'conc-3');
    const expiresAt = new Date(Date.now() + 60_000);
    const work = Array.from({ length: 200 }, async (_v, i): Promise<bigint> => {
      const reservationId = newId();
      const r = await services.quota.reserve({
        reservationId,
        workspaceId: access.workspace_id,
        accessId: access.id,
        periodId: period.id,
        units: 50n,
        requestId: `m-${i}`,
        expiresAt,
      });
      if (!r.ok) return 0n;
      if (i % 3 === 0) {
        await services.quota.release(reservationId);
        return 0n;
      }
      await services.quota.settle({
        reservationId,
        consumedUnits: 40n,
        inputTokens: 40n,
        cachedInputTokens: 0n,
        outputTokens: 0n,
        model: null,
        invocationId: null,
      });
      return 40n;
    });
    const consumed = (await Promise.all(work)).reduce((a, b) => a + b, 0n);
    const row = await periodRow(period.id);
    expect(row.reserved_units).toBe(0n);
    expect(row.consumed_units).toBe(consumed);
    expect(row.consumed_units).toBeLessThanOrEqual(row.granted_units);
  });
});

describe('settle, release and sweep', () => {
  it('a double settle is a no-op; release after settle changes nothing', async () => {
    const { access, period } = await provisionAccess(services, { quotaUnits: '1000' }, 'double');
    const reservationId = newId();
    const r = await services.quota.reserve({
      reservationId,
      workspaceId: access.workspace_id,
      accessId: access.id,
      periodId: period.id,
      units: 300n,
      requestId: 'd',
      expiresAt: new Date(Date.now() + 60_000),
    });
    expect(r).toEqual({ ok: true, remaining: 700n });
    const input = { reservationId, consumedUnits: 120n, inputTokens: 100n, cachedInputTokens: 10n, outputTokens: 10n, model: 'm', invocationId: null };
    const first = await services.quota.settle(input);
    expect(first?.usageEventId).toBeTruthy();
    expect(first?.adjustmentEventId).toBeNull();
    expect(await services.quota.settle(input)).toBeNull();
    expect(await services.quota.release(reservationId)).toBe(false);
    const row = await periodRow(period.id);
    expect(row).toMatchObject({ reserved_units: 0n, consumed_units: 120n });
    const snapshot = await services.quota.snapshot(access.id, new Date());
    expect(snapshot).toMatchObject({ grantedUnits: 1000n, reservedUnits: 0n, consumedUnits: 120n, availableUnits: 880n });
  });

  it('refuses more than is available and a negative amount', async () => {
    const { access, period } = await provisionAccess(services, { quotaUnits: '10' }, 'small');
    const base = { workspaceId: access.workspace_id, accessId: access.id, periodId: period.id, requestId: 'x', expiresAt: new Date(Date.now() + 1000) };
    expect(await services.quota.reserve({ ...base, reservationId: newId(), units: 11n })).toEqual({ ok: false, available: 10n });
    expect(await services.quota.reserve({ ...base, reservationId: newId(), units: 10n })).toEqual({ ok: true, remaining: 0n });
    expect(await services.quota.reserve({ ...base, reservationId: newId(), units: 1n })).toEqual({ ok: false, available: 0n });
    await expect(services.quota.reserve({ ...base, reservationId: newId(), units: -1n })).rejects.toThrow(RangeError);
  });

  it('the sweeper expires reservations past their TTL and returns their units, once', async () => {
    const { access, period } = await provisionAccess(services, { quotaUnits: '1000' }, 'sweep');
    const base = { workspaceId: access.workspace_id, accessId: access.id, periodId: period.id, requestId: 's' };
    const past = new Date(Date.now() - 1000);
    const stale = [newId(), newId(), newId()];
    for (const id of stale) await services.quota.reserve({ ...base, reservationId: id, units: 100n, expiresAt: past });
    const live = newId();
    await services.quota.reserve({ ...base, reservationId: live, units: 50n, expiresAt: new Date(Date.now() + 60_000) });
    const counts = await Promise.all([services.quota.sweepExpired(new Date()), services.quota.sweepExpired(new Date())]);
    expect(counts[0]! + counts[1]!).toBe(3);
    expect((await periodRow(period.id)).reserved_units).toBe(50n);
    expect(await services.quota.settle({ reservationId: stale[0]!, consumedUnits: 1n, inputTokens: 1n, cachedInputTokens: 0n, outputTokens: 0n, model: null, invocationId: null })).toBeNull();
    expect(await services.quota.sweepExpired(new Date())).toBe(0);
  });

  it('usage events are append-only and a published strategy cannot be changed, even in SQL', async () => {
    const { access, period, strategy } = await provisionAccess(services, { quotaUnits: '1000' }, 'immutable');
    const reservationId = newId();
    await services.quota.reserve({ reservationId, workspaceId: access.workspace_id, accessId: access.id, periodId: period.id, units: 1n, requestId: 'i', expiresAt: new Date(Date.now() + 60_000) });
    await services.quota.settle({ reservationId, consumedUnits: 1n, inputTokens: 1n, cachedInputTokens: 0n, outputTokens: 0n, model: null, invocationId: null });
    await expect(database.db('usage_events').where({ reservation_id: reservationId }).update({ units: 0 })).rejects.toThrow(/append-only/);
    await expect(database.db('usage_events').where({ reservation_id: reservationId }).del()).rejects.toThrow(/append-only/);
    await expect(database.db('quota_strategies').where({ id: strategy.id }).update({ quota_units: 1 })).rejects.toThrow(/immutable/);
  });

  it('a second USAGE event of an invocation is refused by the database, whatever reservation it names', async () => {
    const { access, period } = await provisionAccess(services, { quotaUnits: '1000' }, 'one-per-invocation');
    const event = (kind: 'USAGE' | 'ADJUSTMENT', invocationId: string) => ({
      id: newId(),
      workspace_id: access.workspace_id,
      workspace_access_id: access.id,
      quota_period_id: period.id,
      reservation_id: newId(),
      invocation_id: invocationId,
      kind,
      units: 1,
      created_at: new Date(),
    });
    const invocationId = newId();
    await database.db('usage_events').insert([event('USAGE', invocationId), event('ADJUSTMENT', invocationId)]);
    await expect(database.db('usage_events').insert(event('USAGE', invocationId))).rejects.toThrow(/usage_events_one_per_invocation/);
  });
});
