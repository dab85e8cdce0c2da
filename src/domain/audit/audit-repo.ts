import type { Knex } from 'knex';
import type { Queryable } from '../../db/database.js';
import { paginate, whereInRange, type Page, type PageRequest, type TimeRange } from '../pagination.js';

export interface AuditRow {
  id: string;
  workspace_id: string | null;
  actor_key_id: string;
  /** A person's session: the person, their email then, and the role they acted with (also a key's role). */
  actor_person_id: string | null;
  actor_email: string | null;
  actor_role: string | null;
  action: string;
  resource_type: string;
  resource_id: string;
  request_id: string | null;
  client_address: string | null;
  changes: Record<string, unknown>;
  created_at: Date;
}

/**
 * An entry as read back: with the name its Management Key has now, or its person's (their name, else their email);
 * null: the root key of the environment, or Nexus itself.
 */
export interface ListedAuditRow extends AuditRow {
  actor_name: string | null;
  /** The person's subject at their provider (a session's entry); null otherwise. */
  actor_subject: string | null;
}

/** `since`/`until` bound the entry's time. */
export interface AuditFilter extends PageRequest, TimeRange {
  workspaceId: string;
  action?: string | undefined;
  resourceType?: string | undefined;
  resourceId?: string | undefined;
  actorKeyId?: string | undefined;
  actorEmail?: string | undefined;
}

export function createAuditRepo(db: Queryable) {
  return {
    async insert(row: AuditRow, q: Queryable = db): Promise<void> {
      await q('audit_logs').insert({ ...row, changes: JSON.stringify(row.changes) });
    },

    /** Newest first (uuid v7 order), over the (workspace_id, id) index. */
    async list(filter: AuditFilter, q: Queryable = db): Promise<Page<ListedAuditRow>> {
      // actor_key_id is text ('root', 'system', 'session:<id>' or a key's uuid): the key's id is compared as text.
      const query: Knex.QueryBuilder = q('audit_logs as a')
        .joinRaw('left join management_keys as k on k.id::text = a.actor_key_id')
        .leftJoin('persons as p', 'p.id', 'a.actor_person_id')
        .select('a.*', q.raw('coalesce(k.name, p.name, a.actor_email) as actor_name'), 'p.subject as actor_subject')
        .where({ 'a.workspace_id': filter.workspaceId });
      if (filter.action) query.where({ 'a.action': filter.action });
      if (filter.resourceType) query.where({ 'a.resource_type': filter.resourceType });
      if (filter.resourceId) query.where({ 'a.resource_id': filter.resourceId });
      if (filter.actorKeyId) query.where({ 'a.actor_key_id': filter.actorKeyId });
      if (filter.actorEmail) query.where({ 'a.actor_email': filter.actorEmail.toLowerCase() });
      whereInRange(query, 'a.created_at', filter);
      return paginate<ListedAuditRow>(query, filter, 'a.id');
    },
  };
}

export type AuditRepo = ReturnType<typeof createAuditRepo>;
