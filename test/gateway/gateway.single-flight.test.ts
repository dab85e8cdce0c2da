/**
 * A burst of a new key's first calls (a cold tenant): its key lookup and its lease acquisition are
 * single-flight, so the burst makes one of each, and the calls that waited share the answer. A lookup
 * that fails is shared by the calls waiting for it and not kept: the next call looks up again.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
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
  // The burst's calls share the lookup's entry: a TTL long enough that a slow host's burst does not reach the
  // background refresh at three quarters of it (the refresh has its own test below).
  t = await startTestApp({ env: { NEXUS_AUTH_CACHE_TTL_MS: '5000' } });
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
  it('reads an entry in use again once it is past three quarters of its TTL, while it still answers', async () => {
    // The cache reads Date.now(): only the date is faked, and moved by the test; timers run as they do.
    vi.useFakeTimers({ toFake: ['Date'] });
    const start = Date.now();
    const at = (ms: number) => vi.setSystemTime(start + ms);
    const settled = () => new Promise((r) => setTimeout(r, 0));
    let version = 0;
    let fail = false;
    let release = () => {};
    const cache = createAuthCache({
      repo: {
        lookup: async () => {
          await new Promise<void>((r) => (release = r));
          if (fail) throw new Error('lookup failed');
          return { ...row, key_id: `k${++version}` };
        },
      },
      clock: { now: () => new Date() },
      ttlMs: 1000,
      outageGraceMs: 0,
      hash: (token) => `h:${token}`,
    });
    try {
      const first = cache.lookup('tok', 'conn');
      release();
      expect((await first).row!.key_id).toBe('k1');
      // In its first three quarters: answered, nothing read.
      at(749);
      expect(cache.cached('tok', 'conn')!.row!.key_id).toBe('k1');
      expect(cache.queries()).toBe(1);
      // Past them: still answered at once, and one lookup under way however many calls ask meanwhile.
      at(750);
      expect(cache.cached('tok', 'conn')!.row!.key_id).toBe('k1');
      expect(cache.cached('tok', 'conn')!.row!.key_id).toBe('k1');
      expect(cache.queries()).toBe(2);
      release();
      await settled();
      const renewed = cache.cached('tok', 'conn')!;
      expect(renewed.row!.key_id).toBe('k2');
      // A refresh that fails keeps nothing: the entry answers until its TTL, then a call waits for a lookup of its own.
      at(1500);
      fail = true;
      expect(cache.cached('tok', 'conn')).toBe(renewed);
      release();
      await settled();
      at(1749);
      expect(cache.cached('tok', 'conn')).toBe(renewed);
      at(1750);
      expect(cache.cached('tok', 'conn')).toBeUndefined();
      const after = cache.lookup('tok', 'conn');
      release();
      await expect(after).rejects.toThrow('lookup failed');
      expect(cache.queries()).toBe(4);
      // An invalidation while a refresh is under way drops the entry, and the refresh's answer is not kept.
      fail = false;
      const fresh = cache.lookup('tok', 'conn');
      release();
      const entry = await fresh;
      at(2600);
      expect(cache.cached('tok', 'conn')).toBe(entry);
      cache.invalidate({ kind: 'key', id: entry.row!.key_id } as never);
      release();
      await settled();
      expect(cache.cached('tok', 'conn')).toBeUndefined();
      expect(cache.queries()).toBe(6);
    } finally {
      cache.close();
      vi.useRealTimers();
    }
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
