/** All SQL of model_prices (the price book). The price a call is charged at is read by src/domain/recording/price-sql.ts. */
import type { Queryable } from '../../db/database.js';
import { paginate, type Page, type PageRequest } from '../pagination.js';

/** The prices of the kinds beyond text tokens (docs/pricing.md, "Kinds"): their name on the wire -> their column. */
export const KIND_PRICES = {
  audioInputPerMillion: 'audio_input_per_million',
  audioOutputPerMillion: 'audio_output_per_million',
  imageInputPerMillion: 'image_input_per_million',
  imageOutputPerMillion: 'image_output_per_million',
  perImage: 'per_image',
  perSecond: 'per_second',
  charactersPerMillion: 'characters_per_million',
  perCall: 'per_call',
} as const;

export type KindPriceName = keyof typeof KIND_PRICES;

/** A price's kinds: the decimal string of each it sets, and its images' prices by tier. */
export type KindPrices = Partial<Record<KindPriceName, string>> & { perImageTier?: Record<string, string> };

/** The kinds' columns of a price row: decimal strings (numeric), null where the price sets none. */
export type KindPriceColumns = { [K in KindPriceName as (typeof KIND_PRICES)[K]]: string | null } & {
  per_image_tier: Record<string, string> | null;
};

export interface PriceRow extends KindPriceColumns {
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
  reasoning_per_million::text as reasoning_per_million, effective_from, effective_to, source, created_at,
  ${Object.values(KIND_PRICES)
    .map((c) => `${c}::text as ${c}`)
    .join(', ')}, per_image_tier`;

export function createPriceRepo(db: Queryable) {
  return {
    async insert(rows: PriceRow[], tx: Queryable): Promise<void> {
      // A large import in slices: PostgreSQL takes at most 65535 bound values a statement.
      // per_image_tier as JSON text: knex would send an object as is.
      const columns = rows.map((r) => ({ ...r, per_image_tier: r.per_image_tier ? JSON.stringify(r.per_image_tier) : null }));
      for (let i = 0; i < columns.length; i += 1000) await tx('model_prices').insert(columns.slice(i, i + 1000));
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
