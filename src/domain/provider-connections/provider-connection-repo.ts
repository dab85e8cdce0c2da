import type { Queryable } from '../../db/database.js';
import { table } from '../../db/table.js';
import { paginate, type Page, type PageRequest } from '../pagination.js';
import type { ProtocolProfile } from '../../protocols/index.js';
import type { ConnectionRetry } from './connection-retry.js';

export type ProviderConnectionStatus = 'ACTIVE' | 'SUSPENDED' | 'ARCHIVED';

export interface ProviderConnectionRow {
  id: string;
  workspace_id: string;
  name: string;
  protocol_profile: ProtocolProfile;
  /** No trailing slash; the gateway appends the caller's path. */
  base_url: string;
  status: ProviderConnectionStatus;
  api_key_ciphertext: string;
  api_key_key_id: string;
  secret_preview: string;
  /** null: config.upstreamTimeoutMs. */
  upstream_timeout_ms: number | null;
  /** null: one attempt per call. */
  retry: ConnectionRetry | null;
  /** false: its upstream may answer past the output cap it is sent; calls are admitted at their plan's maxOutputTokens. */
  enforces_output_cap: boolean;
  metadata: Record<string, unknown>;
  last_verified_at: Date | null;
  /** The last verification, passed or failed: its outcome (`reachable`, or why not) and when. */
  last_verify_outcome?: string | null;
  last_verify_at?: Date | null;
  /** The health last announced by an event (provider_connection.unhealthy/.recovered); null: none yet. */
  event_health?: 'HEALTHY' | 'UNHEALTHY' | null;
  created_at: Date;
  updated_at: Date;
  archived_at: Date | null;
}

export interface ProviderConnectionFilter extends PageRequest {
  workspaceId: string;
  status?: ProviderConnectionStatus | undefined;
}

export function createProviderConnectionRepo(db: Queryable) {
  const connections = table<ProviderConnectionRow>(db, 'provider_connections', { json: ['metadata', 'retry'] });
  return {
    insert: connections.insert,
    findById: connections.findById,
    /** Locks the row for the rest of the transaction (rotate vs. update vs. archive races). */
    findByIdForUpdate: connections.findByIdForUpdate,
    update: connections.updateById,

    async list(filter: ProviderConnectionFilter, q: Queryable = db): Promise<Page<ProviderConnectionRow>> {
      const query = q('provider_connections').select('*').where({ workspace_id: filter.workspaceId });
      if (filter.status) query.where({ status: filter.status });
      return paginate<ProviderConnectionRow>(query, filter);
    },
  };
}

export type ProviderConnectionRepo = ReturnType<typeof createProviderConnectionRepo>;
