import type { ListAuditLogsData, ListAuditLogsResponses } from '../../../generated/client/types.gen.js';
import type { Services } from '../../domain/services.js';
import { toAuditLogDto } from './audit-query-mapper.js';
import { handler, page, type HandlerMap } from '../../http/handler.js';
import { listQuery } from '../../http/wire.js';

export function auditLogHandlers({ auditLogs }: Services): HandlerMap {
  return {
    listAuditLogs: handler<ListAuditLogsData, ListAuditLogsResponses>(async ({ actor, path, query }) => {
      const result = await auditLogs.list(actor, path.workspaceId, listQuery(query));
      return page(result.items.map(toAuditLogDto), result.nextAfter);
    }),
  };
}
