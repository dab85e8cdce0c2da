/** NEXUS_LEASE_TTL_MS and its deprecated alias NEXUS_RESERVATION_TTL_MS (src/config.ts). */
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';

const KEY = Buffer.alloc(32, 7).toString('base64');

function load(env: Record<string, string>) {
  const warnings: string[] = [];
  const config = loadConfig({ NEXUS_ENCRYPTION_KEY: KEY, ...env }, (msg) => warnings.push(msg));
  return { leaseTtlMs: config.leaseTtlMs, warnings };
}

describe('the lease TTL', () => {
  it('is 10 s by default, or NEXUS_LEASE_TTL_MS, without a warning', () => {
    expect(load({})).toEqual({ leaseTtlMs: 10_000, warnings: [] });
    expect(load({ NEXUS_LEASE_TTL_MS: '2500' })).toEqual({ leaseTtlMs: 2500, warnings: [] });
  });

  it('reads NEXUS_RESERVATION_TTL_MS when NEXUS_LEASE_TTL_MS is unset, and warns that it is deprecated', () => {
    const { leaseTtlMs, warnings } = load({ NEXUS_RESERVATION_TTL_MS: '3000' });
    expect(leaseTtlMs).toBe(3000);
    expect(warnings).toEqual([expect.stringMatching(/NEXUS_RESERVATION_TTL_MS is deprecated: rename it NEXUS_LEASE_TTL_MS/)]);
  });

  it('takes the new name when both are set', () => {
    const { leaseTtlMs, warnings } = load({ NEXUS_LEASE_TTL_MS: '2000', NEXUS_RESERVATION_TTL_MS: '3000' });
    expect(leaseTtlMs).toBe(2000);
    expect(warnings).toEqual([expect.stringMatching(/NEXUS_RESERVATION_TTL_MS is deprecated and ignored/)]);
  });

  it.each([
    [{ NEXUS_LEASE_TTL_MS: '999' }, /NEXUS_LEASE_TTL_MS must be >= 1000/],
    [{ NEXUS_RESERVATION_TTL_MS: '60001' }, /NEXUS_RESERVATION_TTL_MS must be <= 60000/],
  ])('refuses a value out of range under either name: %o', (env, message) => {
    expect(() => load(env)).toThrow(ConfigError);
    expect(() => load(env)).toThrow(message);
  });
});
