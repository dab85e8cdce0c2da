/** Every operationId of the contract maps to exactly one handler, by area. */
import type { Services } from '../domain/services.js';
import type { HandlerContext, HandlerMap } from '../http/handler.js';
import { systemHandlers } from './system/system.js';
import { workspaceHandlers } from './workspaces/workspaces.js';
import { planHandlers } from './plans/plans.js';
import { accessHandlers } from './accesses/accesses.js';
import { invocationHandlers } from './invocations/invocations.js';
import { gatewayHandlers } from './gateway/gateway.js';
import { providerConnectionHandlers } from './provider-connections/provider-connections.js';
import { routeHandlers } from './routes/routes.js';
import { auditLogHandlers } from './audit-logs/audit-logs.js';
import { billingHandlers } from './billing/billing.js';
import { webhookHandlers } from './webhooks/webhooks.js';
import { moneyHandlers } from './money/money.js';
import { managementKeyHandlers } from './management-keys/management-keys.js';
import { peopleHandlers } from './people/people.js';

export function createHandlers(services: Services, context: HandlerContext): HandlerMap {
  const areas: HandlerMap[] = [
    systemHandlers(services, context),
    workspaceHandlers(services),
    providerConnectionHandlers(services),
    routeHandlers(services),
    auditLogHandlers(services),
    planHandlers(services),
    accessHandlers(services, context),
    invocationHandlers(services),
    gatewayHandlers(),
    billingHandlers(services),
    webhookHandlers(services),
    moneyHandlers(services),
    managementKeyHandlers(services),
    peopleHandlers(services),
  ];
  const all: HandlerMap = {};
  for (const area of areas) {
    for (const [operationId, fn] of Object.entries(area)) {
      if (all[operationId]) throw new Error(`Two handlers for ${operationId}`);
      all[operationId] = fn;
    }
  }
  return all;
}
