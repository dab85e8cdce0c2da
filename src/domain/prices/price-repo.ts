/** All SQL of model_prices (the price book). The price a call is charged at is read by src/domain/recording/price-sql.ts. */
import type { Queryable } from '../../db/database.js';
import { paginate, type Page, type PageRequest } from '../pagination.js';

export interface PriceRow {
  id: string;
  workspace_id: string;
  provider_connection_id: string | null;
  protocol_profile: string | null;
  model_pattern: string;
  /** The pattern as LIKE sees it; null for an exact model name. */
  model_like: string | null;
  currency: string;
  /** Decimal strings, exact (numeric in the table). */
  input_per_million: string;
  cached_input_per_million: string | null;
  cache_write_per_million: string | null;
  output_per_million: string;
  reasoning_per_million: string | null;
  effective_from: Date;
  effective_to: Date | null;
  source: 'manual' | 'litellm';
  created_at: Date;
}

export interface PriceFilter extends PageRequest {
  workspaceId: string;
  /** Only the prices in force at this time. */
  at?: Date | undefined;
}

/** numeric comes back as text from both drivers (PGlite would otherwise make it a float). */
const COLUMNS = `id, workspace_id, provider_connection_id, protocol_profile, model_pattern, model_like, currency,
  input_per_million::text as input_per_million, cached_input_per_million::text as cached_input_per_million,
  cache_write_per_million::text as cache_write_per_million, output_per_million::text as output_per_million,
  reasoning_per_million::text as reasoning_per_million, effective_from, effective_to, source, created_at`;

export function createPriceRepo(db: Queryable) {
  return {
    async insert(rows: PriceRow[], tx: Queryable): Promise<void> {
      // A large import in slices: PostgreSQL takes at most 65535 bound values a statement.
      for (let i = 0; i < rows.length; i += 1000) await tx('model_prices').insert(rows.slice(i, i + 1000));
    },

    /** Locks the workspace's row: the price book's writers take it first. */
    async lockBook(workspaceId: string, tx: Queryable): Promise<void> {
      await tx.raw('select id from workspaces where id = ? for update', [workspaceId]);
    },

    async find(id: string, q: Queryable = db): Promise<PriceRow | undefined> {
      return q('model_prices').select(q.raw(COLUMNS)).where({ id }).first();
    },

    async findForUpdate(id: string, tx: Queryable): Promise<PriceRow | undefined> {
      return tx('model_prices').select(tx.raw(COLUMNS)).where({ id }).forUpdate().first();
    },

    /** The workspace's open or later-closing prices that a new open price from `from` would overlap, of the same pattern and scope. */
    async overlapping(
      workspaceId: string,
      from: Date,
      tx: Queryable,
    ): Promise<Pick<PriceRow, 'model_pattern' | 'provider_connection_id' | 'protocol_profile'>[]> {
      return tx('model_prices')
        .where({ workspace_id: workspaceId })
        .where((w) => void w.whereNull('effective_to').orWhere('effective_to', '>', from))
        .select('model_pattern', 'provider_connection_id', 'protocol_profile');
    },

    async close(id: string, to: Date, tx: Queryable): Promise<void> {
      await tx('model_prices').where({ id }).update({ effective_to: to });
    },

    async list(filter: PriceFilter, q: Queryable = db): Promise<Page<PriceRow>> {
      const query = q('model_prices').select(q.raw(COLUMNS)).where({ workspace_id: filter.workspaceId });
      if (filter.at) {
        const at = filter.at;
        query.where('effective_from', '<=', at).where((w) => void w.whereNull('effective_to').orWhere('effective_to', '>', at));
      }
      return paginate<PriceRow>(query, filter);
    },
  };
}

export type PriceRepo = ReturnType<typeof createPriceRepo>;
