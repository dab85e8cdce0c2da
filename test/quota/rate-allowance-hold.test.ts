/**
 * What a busy access's allowance does past its hold (src/domain/rate-limits/rate-allowances.ts,
 * docs/rate-limits.md): a sliver of each limit (at most 1%) is kept for the next calls, so a busy
 * access on generous limits makes one statement per many calls; more than that goes back at the
 * hold's end, as does everything when the plan's limits change. The first grant already asks for a
 * sliver's worth of calls. The allowances run on the real rate repository over PostgreSQL; the
 * repository is wrapped only to count its statements, and the clock is the test's, so each hold's end
 * is a step of the test (one call stays in flight, so the access is never idle and the idle timer
 * never releases it).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRateAllowances, type RateTarget } from '../../src/domain/rate-limits/rate-allowances.js';
import { createRateRepo, type RateRepo } from '../../src/domain/rate-limits/rate-repo.js';
import type { RateLimits } from '../../src/domain/rate-limits/rate-types.js';
import type { Services } from '../../src/domain/services.js';
import { createLogger } from '../../src/observability/logger.js';
import { createTestDatabase, type TestDatabase } from '../support/test-db.js';
import { provisionAccess, servicesFor } from './quota-fixture.js';

const IDLE_MS = 1000;

let database: TestDatabase;
let services: Services;

beforeAll(async () => {
  database = await createTestDatabase();
  services = servicesFor(database, { now: () => new Date() });
});
afterAll(async () => {
  await database?.drop();
});

/** The allowances of one process on a clock the test moves, and the statements it made. */
function processOn(start: number) {
  let nowMs = start;
  const statements = { take: 0, giveBack: 0 };
  const repo = createRateRepo(database.db);
  const counted: RateRepo = {
    ...repo,
    take: (a) => (statements.take++, repo.take(a)),
    giveBack: (g) => (statements.giveBack++, repo.giveBack(g)),
  };
  const allowances = createRateAllowances({
    repo: counted,
    clock: { now: () => new Date(nowMs) },
    logger: createLogger('silent'),
    ttlMs: 30_000,
    idleMs: IDLE_MS,
  });
  return { allowances, statements, advance: (ms: number) => (nowMs += ms) };
}

async function targetFor(name: string): Promise<RateTarget> {
  const { workspace, access } = await provisionAccess(services, { quotaUnits: '1000000' }, name);
  return { workspaceId: workspace.id, accessId: access.id };
}

/** Five holds' worth of calls, ten per hold, with one call in flight throughout; settles the rest. */
async function busyForFiveHolds(p: ReturnType<typeof processOn>, target: RateTarget, limits: RateLimits) {
  const first = await p.allowances.admit(target, limits, 100);
  expect(first.ok).toBe(true);
  for (let hold = 0; hold < 5; hold++) {
    for (let i = 0; i < 10; i++) {
      const a = await p.allowances.admit(target, limits, 100);
      expect(a.ok).toBe(true);
      if (a.ok) p.allowances.settle(a.ticket, 30);
    }
    p.advance(IDLE_MS + 200);
  }
  await p.allowances.admit(target, limits, 100);
  if (first.ok) p.allowances.settle(first.ticket, 30);
}

describe('a busy access past its hold', () => {
  it('keeps a sliver of generous limits: a few grants and no give-back over five holds', async () => {
    const p = processOn(Date.now());
    await busyForFiveHolds(p, await targetFor('generous'), {
      requestsPerMinute: 1_000_000,
      tokensPerMinute: 100_000_000,
      concurrentCalls: null,
    });
    expect(p.statements.giveBack).toBe(0);
    // The first grant asks for the calls that are 1% of each limit (1024 at most; here 10,000 requests and
    // 1,000,000 tokens of 100 a call): the 52 calls take one grant, where doubling from 16 calls' worth took three.
    expect(p.statements.take).toBe(1);
    p.allowances.close();
  });

  it('gives back what is more than 1% of a limit at each hold, and takes it again', async () => {
    const p = processOn(Date.now());
    // 16 calls' worth of headroom is 2.7% of 600 requests a minute.
    await busyForFiveHolds(p, await targetFor('small'), { requestsPerMinute: 600, tokensPerMinute: null, concurrentCalls: null });
    expect(p.statements.giveBack).toBeGreaterThanOrEqual(4);
    expect(p.statements.take).toBeGreaterThanOrEqual(5);
    await p.allowances.drain();
    p.allowances.close();
  });

  it('gives back everything it holds at the hold after the plan changes its limits, however small a share', async () => {
    const p = processOn(Date.now());
    const target = await targetFor('changed');
    const generous = { requestsPerMinute: 1_000_000, tokensPerMinute: null, concurrentCalls: null };
    const inFlight = await p.allowances.admit(target, generous, 100);
    expect(inFlight.ok).toBe(true);
    const raised = { ...generous, requestsPerMinute: 2_000_000 };
    p.advance(IDLE_MS + 200);
    expect((await p.allowances.admit(target, raised, 100)).ok).toBe(true);
    expect(p.statements.giveBack).toBe(1);
    await p.allowances.drain();
    p.allowances.close();
  });
});
