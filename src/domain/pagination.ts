/**
 * Keyset pagination over time-ordered UUID v7 ids: newest first, stable, no gap
 * and no duplicate when rows are added between pages. A page resumes after the id
 * of the last row seen (the wire's opaque cursor carries it: src/http/wire.ts).
 */
import type { Knex } from 'knex';

export interface PageRequest {
  limit?: number | undefined;
  /** The id of the last row of the previous page. */
  after?: string | undefined;
}

export interface Page<T> {
  items: T[];
  /** The id of this page's last row when another page follows; null on the last page. */
  nextAfter: string | null;
}

const DEFAULT_LIMIT = 20;

/** A list's time window: `since` inclusive, `until` exclusive. */
export interface TimeRange {
  since?: Date | undefined;
  until?: Date | undefined;
}

export function whereInRange(query: Knex.QueryBuilder, column: string, range: TimeRange): void {
  if (range.since) query.where(column, '>=', range.since);
  if (range.until) query.where(column, '<', range.until);
}

/** Applies the page to a query ordered by `column` descending and runs it. */
export async function paginate<Row extends object>(query: Knex.QueryBuilder, page: PageRequest, column = 'id'): Promise<Page<Row>> {
  const limit = page.limit ?? DEFAULT_LIMIT;
  if (page.after) query.where(column, '<', page.after);
  const rows = (await query.orderBy(column, 'desc').limit(limit + 1)) as Row[];
  const more = rows.length > limit;
  const items = more ? rows.slice(0, limit) : rows;
  const key = column.includes('.') ? column.slice(column.lastIndexOf('.') + 1) : column;
  return { items, nextAfter: more ? String((items[items.length - 1] as Record<string, unknown>)[key]) : null };
}
