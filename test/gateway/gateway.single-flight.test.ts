/**
 * A burst of a new key's first calls (a cold tenant): its key lookup and its lease acquisition are
 * single-flight, so the burst makes one of each, and the calls that waited share the answer. A lookup
 * that fails is shared by the calls waiting for it and not kept: the next call looks up again.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAuthCache, upstreamOf } from '../../src/gateway/auth-cache.js';
import { createSecretBox } from '../../src/domain/security/secret-box.js';
import { sealProviderApiKey } from '../../src/domain/provider-connections/provider-secret.js';
import { randomBytes } from 'node:crypto';
import type { AuthRow } from '../../src/gateway/auth-repo.js';
import { SECRET_MARKER } from '../security/secret-marker.js';
import { startOpenAiUpstream, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createTenant, gatewayFetch, periodOf } from './gateway-support.js';

let t: TestApp;
let up: FakeUpstream;
const KEY = `${SECRET_MARKER}-upstream-single-flight-0123456789`;
const BODY = JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'burst' }], max_tokens: 10 });

beforeAll(async () => {
  t = await startTestApp();
  up = await startOpenAiUpstream({ apiKey: KEY });
});
afterAll(async () => {
  await t?.close();
  await up?.close();
});

async function leaseStatements(kind: 'acquire' | 'extend'): Promise<number> {
  const metrics = await (await fetch(`${t.url}/metrics`)).text();
  return Number(new RegExp(`^nexus_quota_lease_statements_total\\{kind="${kind}"\\} (\\d+)`, 'm').exec(metrics)?.[1] ?? 0);
}

describe('a burst of first calls with one key', () => {
  it('makes one key lookup and one lease acquisition, and every call is answered and charged', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, quotaUnits: 10_000_000n });
    const lookupsBefore = t.nexus.gateway.keyLookups();
    const acquiresBefore = await leaseStatements('acquire');
    const N = 40;
    const answers = await Promise.all(
      Array.from({ length: N }, async () => {
        const res = await gatewayFetch()(`${tenant.gatewayBaseUrl}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json', 'x-fake-usage': '10,5,0' },
          body: BODY,
        });
        await res.text();
        return res.status;
      }),
    );
    expect(answers).toEqual(Array.from({ length: N }, () => 200));
    expect(t.nexus.gateway.keyLookups() - lookupsBefore).toBe(1);
    expect((await leaseStatements('acquire')) - acquiresBefore).toBe(1);
    await t.nexus.gateway.drain();
    // 10 input + 2 x 5 output units a call.
    expect(await periodOf(t, tenant.accessId)).toMatchObject({ reserved: 0n, consumed: BigInt(N) * 20n });
  });

  it('a wrong key in a burst is one lookup too, and every call gets 401', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY });
    const lookupsBefore = t.nexus.gateway.keyLookups();
    const statuses = await Promise.all(
      Array.from({ length: 20 }, async () => {
        const res = await gatewayFetch()(`${tenant.gatewayBaseUrl}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${tenant.apiKey}x`, 'content-type': 'application/json' },
          body: BODY,
        });
        await res.text();
        return res.status;
      }),
    );
    expect(statuses).toEqual(Array.from({ length: 20 }, () => 401));
    expect(t.nexus.gateway.keyLookups() - lookupsBefore).toBe(1);
  });
});

describe('the key cache (its single flight)', () => {
  const row = { key_id: 'k', workspace_access_id: 'a', workspace_id: 'w', period_end: null } as unknown as AuthRow;
  function cacheOver(lookup: () => Promise<AuthRow | null>) {
    let calls = 0;
    const cache = createAuthCache({
      repo: {
        lookup: () => {
          calls++;
          return lookup();
        },
      },
      clock: { now: () => new Date() },
      ttlMs: 1000,
      outageGraceMs: 0,
      hash: (token) => `h:${token}`,
    });
    return { cache, calls: () => calls };
  }

  it('shares a failure with the calls waiting for it, and does not keep it', async () => {
    let fail = true;
    const { cache, calls } = cacheOver(async () => {
      await new Promise((r) => setTimeout(r, 20));
      if (fail) throw new Error('lookup failed');
      return row;
    });
    const burst = await Promise.allSettled(Array.from({ length: 10 }, () => cache.lookup('tok', 'conn')));
    expect(burst.map((r) => r.status)).toEqual(Array.from({ length: 10 }, () => 'rejected'));
    expect(calls()).toBe(1);
    fail = false;
    const next = await Promise.all(Array.from({ length: 10 }, () => cache.lookup('tok', 'conn')));
    expect(next.every((e) => e.row === row)).toBe(true);
    expect(calls()).toBe(2);
    // Cached now: no further query.
    await cache.lookup('tok', 'conn');
    expect(calls()).toBe(2);
    cache.close();
  });

  it('a call after an invalidation does not join a lookup started before it', async () => {
    const { cache, calls } = cacheOver(async () => {
      await new Promise((r) => setTimeout(r, 20));
      return row;
    });
    const first = cache.lookup('tok', 'conn');
    cache.invalidate({ kind: 'key', id: 'k' } as never);
    const second = cache.lookup('tok', 'conn');
    await Promise.all([first, second]);
    expect(calls()).toBe(2);
    // Different keys and connections are separate flights.
    await Promise.all([cache.lookup('other', 'conn'), cache.lookup('tok', 'conn2')]);
    expect(calls()).toBe(4);
    cache.close();
  });
  it('an entry read again after its TTL keeps the key hash and, while the connection key is the same, the decrypted upstream', async () => {
    const box = createSecretBox(randomBytes(32));
    const connectionId = '0a1b2c3d-0000-4000-8000-000000000000';
    const sealedRow = (apiKey: string) => {
      const sealed = sealProviderApiKey(box, connectionId, apiKey);
      return {
        ...row,
        connection_id: connectionId,
        protocol_profile: 'openai',
        base_url: 'http://127.0.0.1:9/v1',
        api_key_ciphertext: sealed.ciphertext,
        api_key_key_id: sealed.keyId,
      } as unknown as AuthRow;
    };
    let current = sealedRow('sk-first-0123456789abcdef');
    let hashes = 0;
    let lookups = 0;
    const cache = createAuthCache({
      repo: {
        lookup: async () => {
          lookups++;
          return current;
        },
      },
      clock: { now: () => new Date() },
      ttlMs: 20,
      // An entry past its TTL stays for the outage grace (half a lease's TTL in a process): its successor finds it.
      outageGraceMs: 10_000,
      hash: (token) => {
        hashes++;
        return `h:${token}`;
      },
    });
    const first = await cache.lookup('tok', connectionId);
    expect(upstreamOf(first, first.row!, box).apiKey).toBe('sk-first-0123456789abcdef');
    await new Promise((r) => setTimeout(r, 30));
    // The same row read again: the upstream made for the first entry is the new one's, and the key is not hashed again.
    current = { ...current };
    const second = await cache.lookup('tok', connectionId);
    expect(second).not.toBe(first);
    expect(lookups).toBe(2);
    expect(hashes).toBe(1);
    expect(second.apiKey).toBe('sk-first-0123456789abcdef');
    expect(second.baseUrl).toBe(first.baseUrl);
    // The connection's key rotated (another ciphertext): the next entry decrypts it anew.
    await new Promise((r) => setTimeout(r, 30));
    current = sealedRow('sk-rotated-0123456789abcdef');
    const third = await cache.lookup('tok', connectionId);
    expect(third.apiKey).toBeUndefined();
    expect(upstreamOf(third, third.row!, box).apiKey).toBe('sk-rotated-0123456789abcdef');
    expect(hashes).toBe(1);
    cache.close();
  });
});
