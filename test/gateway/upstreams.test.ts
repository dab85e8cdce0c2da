/** The gateway's upstream pools over time: one per origin while in use, none kept for an origin nobody calls. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createUpstreamPools } from '../../src/gateway/upstreams.js';
import { startOpenAiUpstream, type FakeUpstream } from '../support/fake-upstreams.js';

const KEY = 'sk-upstream-pools-0123456789';
let up: FakeUpstream;

beforeAll(async () => {
  up = await startOpenAiUpstream({ apiKey: KEY });
});
afterAll(() => up?.close());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function chat(pools: ReturnType<typeof createUpstreamPools>, url: URL, headers: Record<string, string> = {}) {
  return pools.get(url).request({
    method: 'POST',
    path: '/v1/chat/completions',
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'm', messages: [] }),
  });
}

describe('upstream pools', () => {
  it('closes and forgets the pool of an origin unused for the idle time, and makes a new one when it is called again', async () => {
    const pools = createUpstreamPools({ allowPrivate: true, idlePoolMs: 100 });
    try {
      const url = new URL(up.url);
      const first = pools.get(url);
      expect(pools.get(new URL(up.url + '/other/path'))).toBe(first);
      const answer = await chat(pools, url);
      expect(answer.statusCode).toBe(200);
      await answer.body.json();
      expect(first.stats.connected).toBe(1);
      await sleep(300);
      expect(pools.size).toBe(0);
      expect(first.closed).toBe(true);
      const again = await chat(pools, url);
      expect(again.statusCode).toBe(200);
      await again.body.json();
      expect(pools.get(url)).not.toBe(first);
      expect(pools.size).toBe(1);
    } finally {
      await pools.close();
    }
  });

  it('keeps the pool of a call running longer than the idle time', async () => {
    const pools = createUpstreamPools({ allowPrivate: true, idlePoolMs: 50 });
    try {
      const url = new URL(up.url);
      const pool = pools.get(url);
      const answer = await chat(pools, url, { 'x-fake-fault': 'late', 'x-fake-delay-ms': '400' });
      expect(answer.statusCode).toBe(200);
      expect((await answer.body.json()) as object).toHaveProperty('usage');
      expect(pools.get(url)).toBe(pool);
      expect(pool.closed).toBe(false);
    } finally {
      await pools.close();
    }
  });
});
