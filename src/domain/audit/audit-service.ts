/**
 * Every control-plane change writes one audit entry, in the caller's transaction.
 * Secrets never reach the table: known secret fields are replaced by [redacted]
 * at any depth, whatever the caller passed.
 */
import type { Queryable } from '../../db/database.js';
import { newId } from '../../ids.js';
import type { Actor, Clock } from '../actor.js';
import type { AuditRepo } from './audit-repo.js';

export const REDACTED = '[redacted]';
const SECRET_FIELD = /^(api_?key|apiKey|secret|.*Secret|.*_secret|credential|password|token|key_hash|ciphertext|authorization)$/i;

function redact(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(redact);
  if (value && typeof value === 'object' && !(value instanceof Date)) {
    return Object.fromEntries(
      Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, SECRET_FIELD.test(k) ? REDACTED : redact(v)]),
    );
  }
  if (typeof value === 'bigint') return value.toString();
  return value;
}

export interface AuditEntry {
  action: string;
  resourceType: string;
  resourceId: string;
  workspaceId: string | null;
  changes?: Record<string, unknown>;
}

export function createAuditService(deps: { auditRepo: AuditRepo; clock: Clock }) {
  return {
    async record(actor: Actor, entry: AuditEntry, tx: Queryable): Promise<void> {
      await deps.auditRepo.insert(
        {
          id: newId(),
          workspace_id: entry.workspaceId,
          actor_key_id: actor.keyId,
          actor_person_id: actor.person?.id ?? null,
          actor_email: actor.person?.email ?? null,
          actor_role: actor.roleIn?.(entry.workspaceId) ?? null,
          action: entry.action,
          resource_type: entry.resourceType,
          resource_id: entry.resourceId,
          request_id: actor.requestId,
          client_address: actor.clientAddress,
          changes: redact(entry.changes ?? {}) as Record<string, unknown>,
          created_at: deps.clock.now(),
        },
        tx,
      );
    },
  };
}

export type AuditService = ReturnType<typeof createAuditService>;
