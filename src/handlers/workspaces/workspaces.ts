import type {
  ArchiveWorkspaceData,
  ArchiveWorkspaceResponses,
  CreateWorkspaceData,
  CreateWorkspaceResponses,
  GetRetentionPolicyData,
  GetRetentionPolicyResponses,
  GetWorkspaceData,
  GetWorkspaceResponses,
  ListWorkspacesData,
  ListWorkspacesResponses,
  UpdateRetentionPolicyData,
  UpdateRetentionPolicyResponses,
  UpdateWorkspaceData,
  UpdateWorkspaceResponses,
} from '../../../generated/client/types.gen.js';
import type { Services } from '../../domain/services.js';
import { toWorkspaceDto } from './workspace-mapper.js';
import { created, handler, noContent, ok, page, type HandlerMap } from '../../http/handler.js';
import { listQuery } from '../../http/wire.js';

export function workspaceHandlers({ workspaces, budgets, history }: Services): HandlerMap {
  return {
    createWorkspace: handler<CreateWorkspaceData, CreateWorkspaceResponses>(async ({ actor, body }) =>
      created(toWorkspaceDto(await workspaces.create(actor, body))),
    ),
    listWorkspaces: handler<ListWorkspacesData, ListWorkspacesResponses>(async ({ actor, query }) => {
      const result = await workspaces.list(actor, listQuery(query));
      return page(result.items.map(toWorkspaceDto), result.nextAfter);
    }),
    getWorkspace: handler<GetWorkspaceData, GetWorkspaceResponses>(async ({ actor, path }) =>
      ok(toWorkspaceDto(await workspaces.get(actor, path.workspaceId))),
    ),
    updateWorkspace: handler<UpdateWorkspaceData, UpdateWorkspaceResponses>(async ({ actor, path, body }) => {
      const row = await workspaces.update(actor, path.workspaceId, body);
      // A new time zone moves the budget's window: its levels are read again in it (a hard level's refusal ends or begins).
      if (body.timeZone !== undefined) await budgets.checkSpend([path.workspaceId]);
      return ok(toWorkspaceDto(row));
    }),
    archiveWorkspace: handler<ArchiveWorkspaceData, ArchiveWorkspaceResponses>(async ({ actor, path }) => {
      await workspaces.archive(actor, path.workspaceId);
      return noContent();
    }),
    getRetentionPolicy: handler<GetRetentionPolicyData, GetRetentionPolicyResponses>(async ({ actor, path }) =>
      ok(await history.getPolicy(actor, path.workspaceId)),
    ),
    updateRetentionPolicy: handler<UpdateRetentionPolicyData, UpdateRetentionPolicyResponses>(async ({ actor, path, body }) =>
      ok(await history.setPolicy(actor, path.workspaceId, body)),
    ),
  };
}
