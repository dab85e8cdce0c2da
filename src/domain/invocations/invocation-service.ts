/**
 * The Admin API's reads of gateway records: invocations (with their attempt and
 * usage events) and the usage/adjustment event log. The gateway writes them
 * (src/gateway/call-recorder.ts); nothing here changes them.
 */
import { AppError } from '../../errors.js';
import { assertVisible, type Actor } from '../actor.js';
import type { Page } from '../pagination.js';
import type { UsageEventRow } from '../quota/quota-types.js';
import type { WorkspaceService } from '../workspaces/workspace-service.js';
import type { InvocationFilter, InvocationRepo, UsageEventFilter } from './invocation-repo.js';
import type { InvocationRow } from './invocation-types.js';

export function createInvocationService(deps: { invocationRepo: InvocationRepo; workspaces: WorkspaceService }) {
  const { invocationRepo, workspaces } = deps;
  return {
    async list(actor: Actor, filter: InvocationFilter): Promise<Page<InvocationRow>> {
      await workspaces.get(actor, filter.workspaceId);
      return invocationRepo.list(filter);
    },

    async get(actor: Actor, id: string): Promise<{ invocation: InvocationRow; usageEvents: UsageEventRow[] }> {
      const invocation = await invocationRepo.findById(id);
      if (!invocation) throw new AppError('invocation_not_found', 'Invocation not found');
      assertVisible(actor, invocation.workspace_id, 'invocation_not_found', 'Invocation');
      return { invocation, usageEvents: await invocationRepo.usageEventsOf(id) };
    },

    async listUsageEvents(actor: Actor, filter: UsageEventFilter): Promise<Page<UsageEventRow>> {
      await workspaces.get(actor, filter.workspaceId);
      return invocationRepo.listUsageEvents(filter);
    },
  };
}
