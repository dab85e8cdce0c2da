/**
 * Crash-safe metering on every protocol (the rows of protocol-rows.ts): a stream's lease reclaimed
 * under it, as if its process had died, and the call recorded and charged once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createTenant, periodOf, reclaimLease } from './gateway-support.js';
import { KEY, rawStream, requestIdOf, ROWS, type Row } from './protocol-rows.js';

let t: TestApp;
const upstreams = new Map<Row, FakeUpstream>();

beforeAll(async () => {
  t = await startTestApp();
  for (const row of ROWS) upstreams.set(row, await row.start());
}, 60_000);
afterAll(async () => {
  await t?.close();
  for (const up of upstreams.values()) await up.close();
});

const tenantFor = (row: Row) =>
  createTenant(t, { baseUrl: upstreams.get(row)!.url, providerKey: KEY, profile: row.profile, ...row.connection });

describe.each(ROWS)('$name', (row) => {
  it('charges a stream under way once when its lease is reclaimed, as if its process had died', async () => {
    const tenant = await tenantFor(row);
    const res = await rawStream(row, tenant, { 'x-fake-fault': 'slow', 'x-fake-delay-ms': '150' });
    expect(res.status).toBe(200);
    await reclaimLease(t, tenant.accessId);
    await res.text();
    await t.nexus.gateway.drain();
    // Recorded and charged once: by the reclaim, as its last heartbeat left it, or by its own process.
    const invocations = await t.database.db('invocations').where({ request_id: requestIdOf(res.headers) });
    expect(invocations).toHaveLength(1);
    expect(['SUCCEEDED', 'FAILED']).toContain(invocations[0].status);
    const units = BigInt(invocations[0].quota_units);
    expect(units).toBeGreaterThan(0n);
    expect(await periodOf(t, tenant.accessId)).toMatchObject({ reserved: 0n, consumed: units });
  });
});
