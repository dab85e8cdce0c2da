import type {
  CreateManagementKeyData,
  CreateManagementKeyResponses,
  ListManagementKeysData,
  ListManagementKeysResponses,
  ManagementKeyDto,
  RevokeManagementKeyData,
  RevokeManagementKeyResponses,
  UpdateManagementKeyData,
  UpdateManagementKeyResponses,
} from '../../../generated/client/types.gen.js';
import type { ScopedKeyRow } from '../../domain/management-keys/management-key-repo.js';
import type { Services } from '../../domain/services.js';
import { created, handler, noContent, ok, page, type HandlerMap } from '../../http/handler.js';
import { listQuery } from '../../http/wire.js';

/** A stored key as the wire shows it: never its hash, and its plaintext only in the answer that creates it. */
function toManagementKeyDto(row: ScopedKeyRow): ManagementKeyDto {
  return {
    id: row.id,
    name: row.name,
    prefix: row.prefix,
    root: row.is_root,
    role: row.role as ManagementKeyDto['role'],
    workspaceIds: row.workspace_ids,
    createdAt: row.created_at.toISOString(),
    ...(row.revoked_at ? { revokedAt: row.revoked_at.toISOString() } : {}),
  };
}

export function managementKeyHandlers({ managementKeys }: Services): HandlerMap {
  return {
    createManagementKey: handler<CreateManagementKeyData, CreateManagementKeyResponses>(async ({ actor, body }) => {
      const { row, key } = await managementKeys.create(actor, body);
      return created({ ...toManagementKeyDto(row), key });
    }),
    listManagementKeys: handler<ListManagementKeysData, ListManagementKeysResponses>(async ({ actor, query }) => {
      const result = await managementKeys.listPage(actor, listQuery(query));
      return page(result.items.map(toManagementKeyDto), result.nextAfter);
    }),
    updateManagementKey: handler<UpdateManagementKeyData, UpdateManagementKeyResponses>(async ({ actor, path, body }) =>
      ok(toManagementKeyDto(await managementKeys.rename(actor, path.managementKeyId, body.name))),
    ),
    revokeManagementKey: handler<RevokeManagementKeyData, RevokeManagementKeyResponses>(async ({ actor, path }) => {
      await managementKeys.revokeByRoot(actor, path.managementKeyId);
      return noContent();
    }),
  };
}
