/**
 * Keyset pagination over time-ordered UUID v7 ids: newest first, stable, no gap
 * and no duplicate when rows are added between pages. The cursor is opaque to
 * callers (base64url JSON of the last id seen).
 */
import type { Knex } from 'knex';
import { AppError } from '../errors.js';
import { isUuid } from '../ids.js';

export interface PageRequest {
  limit?: number | undefined;
  cursor?: string | undefined;
}

export interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

export const DEFAULT_LIMIT = 20;

/** A list's time window (RFC 3339 strings, checked by the contract): `since` inclusive, `until` exclusive. */
export interface TimeRange {
  since?: string | undefined;
  until?: string | undefined;
}

export function whereInRange(query: Knex.QueryBuilder, column: string, range: TimeRange): void {
  if (range.since) query.where(column, '>=', new Date(range.since));
  if (range.until) query.where(column, '<', new Date(range.until));
}

export function encodeCursor(lastId: string): string {
  return Buffer.from(JSON.stringify({ v: 1, id: lastId })).toString('base64url');
}

export function decodeCursor(cursor: string): string {
  try {
    const parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { v?: number; id?: unknown };
    if (parsed.v === 1 && typeof parsed.id === 'string' && isUuid(parsed.id)) return parsed.id;
  } catch {
    // fall through
  }
  throw new AppError('invalid_cursor', 'The cursor is not one this API returned', { param: 'cursor' });
}

/** Applies the page to a query ordered by `column` descending and runs it. */
export async function paginate<Row extends object>(
  query: Knex.QueryBuilder,
  page: PageRequest,
  column = 'id',
): Promise<Page<Row>> {
  const limit = page.limit ?? DEFAULT_LIMIT;
  if (page.cursor) query.where(column, '<', decodeCursor(page.cursor));
  const rows = (await query.orderBy(column, 'desc').limit(limit + 1)) as Row[];
  const more = rows.length > limit;
  const items = more ? rows.slice(0, limit) : rows;
  const key = column.includes('.') ? column.slice(column.lastIndexOf('.') + 1) : column;
  return { items, nextCursor: more ? encodeCursor(String((items[items.length - 1] as Record<string, unknown>)[key])) : null };
}
