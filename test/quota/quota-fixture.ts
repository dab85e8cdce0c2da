/**
 * Builds the services over a test database and provisions one access with a
 * published strategy, through the domain (no HTTP), for the quota tests.
 */
import { loadConfig } from '../../src/config.js';
import { systemActor, type Clock } from '../../src/domain/actor.js';
import { createDomain, type Services, type TestHooks } from '../../src/domain/services.js';
import { createLogger } from '../../src/observability/logger.js';
import { fromCreateStrategyDto } from '../../src/handlers/plans/plan-mapper.js';
import type { TestDatabase } from '../support/test-db.js';
import { TEST_ENCRYPTION_KEY } from '../support/test-app.js';

export const actor = systemActor('test');

export function servicesFor(database: TestDatabase, clock: Clock): Services & TestHooks {
  const config = loadConfig({ NODE_ENV: 'test', NEXUS_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, NEXUS_KEY_ENVIRONMENT: 'test' });
  const { services, testHooks } = createDomain({ db: database.db, config, clock, logger: createLogger('silent'), fetch: globalThis.fetch });
  return { ...services, ...testHooks };
}

export async function provisionAccess(
  services: Services,
  strategy: {
    quotaUnits: `${bigint}`;
    inputMultiplierPpm?: `${bigint}`;
    outputMultiplierPpm?: `${bigint}`;
    cachedInputMultiplierPpm?: `${bigint}`;
  },
  externalUserId = 'u1',
) {
  const ws = await services.workspaces.create(actor, { name: `quota-${externalUserId}` });
  const s = await services.plans.createStrategy(
    actor,
    ws.id,
    fromCreateStrategyDto({
      key: 'q',
      resetInterval: 'MONTH',
      quotaUnits: strategy.quotaUnits,
      inputMultiplierPpm: strategy.inputMultiplierPpm ?? '1000000',
      outputMultiplierPpm: strategy.outputMultiplierPpm ?? '1000000',
      cachedInputMultiplierPpm: strategy.cachedInputMultiplierPpm ?? '1000000',
      maxOutputTokens: 1000,
    }),
  );
  await services.plans.publishStrategy(actor, s.id);
  const plan = await services.plans.createPlan(actor, ws.id, { key: 'p', name: 'P', billingInterval: 'MONTH' });
  await services.plans.bind(actor, plan.id, { strategyId: s.id, effectiveFrom: new Date(0) });
  await services.plans.publishPlan(actor, plan.id);
  const result = await services.accesses.provision(actor, ws.id, { externalUserId, email: 'u@example.com', planId: plan.id });
  return { workspace: ws, plan, strategy: s, access: result.access, period: result.currentPeriod! };
}
