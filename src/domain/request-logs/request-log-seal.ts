/**
 * A request log at rest: sealed whole with the connection secrets' key (security/secret-box.ts: AES-256-GCM, its key
 * id beside it), bound to its invocation and workspace, so that a ciphertext copied to another row fails to open.
 */
import type { SecretBox } from '../security/secret-box.js';
import type { RequestLogContent, RequestLogEntry, RequestLogRow } from './request-log-types.js';

const associatedData = (invocationId: string, workspaceId: string) => `request_logs:${invocationId}:${workspaceId}`;

export function sealRequestLog(box: SecretBox, entry: RequestLogEntry): RequestLogRow {
  const sealed = box.seal(JSON.stringify(entry.content), associatedData(entry.invocationId, entry.workspaceId));
  return {
    invocation_id: entry.invocationId,
    created_at: entry.createdAt,
    workspace_id: entry.workspaceId,
    expires_at: entry.expiresAt,
    key_id: sealed.keyId,
    ciphertext: sealed.ciphertext,
  };
}

export function openRequestLog(box: SecretBox, row: RequestLogRow): RequestLogEntry {
  const text = box.open({ keyId: row.key_id, ciphertext: row.ciphertext }, associatedData(row.invocation_id, row.workspace_id));
  return {
    invocationId: row.invocation_id,
    workspaceId: row.workspace_id,
    createdAt: row.created_at,
    expiresAt: row.expires_at,
    content: JSON.parse(text) as RequestLogContent,
  };
}
