/**
 * Gateway test support: tenants made through the Admin API (test/support/tenant.ts), the
 * contract-checking fetch for gateway calls, and the period's numbers read from the database.
 */
import { contractFetch } from '../support/contract.js';
import type { TestApp } from '../support/test-app.js';
import { provisionTenant, type Tenant, type TenantSpec } from '../support/tenant.js';

export type { Tenant };

/** fetch for gateway calls (and SDKs): every answer is checked against the contract's proxyProvider* operations. */
export const gatewayFetch = contractFetch;

/** A workspace with one connection and one user on a published plan, made with the app's root client. */
export function createTenant(t: TestApp, o: TenantSpec): Promise<Tenant> {
  return provisionTenant(t.client, o);
}

/** The access's current period numbers, straight from the database. */
export async function periodOf(t: TestApp, accessId: string) {
  const row = await t.database.db('quota_periods').where({ workspace_access_id: accessId }).orderBy('period_start', 'desc').first();
  return { granted: BigInt(row.granted_units), reserved: BigInt(row.reserved_units), consumed: BigInt(row.consumed_units) };
}

/** Waits until `check` holds, asking every 25 ms; fails after `ms`. */
export async function until(check: () => Promise<boolean>, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('condition not reached in time');
    await new Promise((r) => setTimeout(r, 25));
  }
}
