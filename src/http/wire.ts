/**
 * Wire values to domain values, for handlers: RFC 3339 timestamps to Dates, a list's
 * cursor to the id it resumes after, its time window to Dates; and for every request
 * (api.ts), its UUIDs in their canonical lower case. The contract has checked their
 * form already; what it cannot check is refused here with a 400 naming the field.
 * 64-bit decimal strings are the mappers' (src/domain/<area>/<x>-mapper.ts).
 */
import { AppError } from '../errors.js';
import { canonicalUuid, isUuid } from '../ids.js';
import type { PageRequest, TimeRange } from '../domain/pagination.js';

/** The part of a (dereferenced) JSON Schema that says where UUIDs are. */
export interface UuidSchema {
  format?: string;
  properties?: Record<string, UuidSchema>;
  additionalProperties?: UuidSchema | boolean;
  items?: UuidSchema;
  allOf?: UuidSchema[];
  oneOf?: UuidSchema[];
  anyOf?: UuidSchema[];
}

/** Deeper than any schema of the contract: a schema that refers to itself stops here. */
const MAX_SCHEMA_DEPTH = 32;

/**
 * A validated wire value with its UUIDs (the strings its schema gives `format: uuid`) in lower case, so that
 * an id sent in upper case finds what the lower-case one does and is stored as Nexus writes ids. Objects and
 * arrays are changed in place; free-form values (metadata) are left as they came.
 */
export function canonicalUuids(value: unknown, schema: UuidSchema | undefined, depth = 0): unknown {
  if (!schema || depth > MAX_SCHEMA_DEPTH || value === null) return value;
  if (typeof value === 'string') return schema.format === 'uuid' ? canonicalUuid(value) : value;
  for (const branch of [...(schema.allOf ?? []), ...(schema.oneOf ?? []), ...(schema.anyOf ?? [])]) {
    value = canonicalUuids(value, branch, depth + 1);
  }
  if (Array.isArray(value)) {
    if (schema.items) for (let i = 0; i < value.length; i++) value[i] = canonicalUuids(value[i], schema.items, depth + 1);
    return value;
  }
  if (typeof value === 'object') {
    const o = value as Record<string, unknown>;
    const extra = typeof schema.additionalProperties === 'object' ? schema.additionalProperties : undefined;
    for (const key of Object.keys(o)) {
      const field = schema.properties?.[key] ?? extra;
      if (field) o[key] = canonicalUuids(o[key], field, depth + 1);
    }
  }
  return value;
}

/** An RFC 3339 timestamp to a Date. */
export function parseTimestamp(value: string, param: string): Date {
  const at = new Date(value);
  if (Number.isNaN(at.getTime())) throw new AppError('invalid_parameter', `${param} must be an RFC 3339 timestamp`, { param });
  return at;
}

/** The same, for a field that may be absent. */
export function optionalTimestamp(value: string | undefined, param: string): Date | undefined {
  return value === undefined ? undefined : parseTimestamp(value, param);
}

/** A page's position as a caller holds it: opaque (base64url JSON of the last id seen). */
export function encodeCursor(lastId: string): string {
  return Buffer.from(JSON.stringify({ v: 1, id: lastId })).toString('base64url');
}

function decodeCursor(cursor: string): string {
  try {
    const parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { v?: number; id?: unknown };
    if (parsed.v === 1 && typeof parsed.id === 'string' && isUuid(parsed.id)) return parsed.id;
  } catch {
    // fall through
  }
  throw new AppError('invalid_cursor', 'The cursor is not one this API returned', { param: 'cursor' });
}

interface WireList {
  cursor?: string | undefined;
  limit?: number | undefined;
  since?: string | undefined;
  until?: string | undefined;
}

/** A list operation's query: its filters as they are, the cursor as the id to resume after, since/until as Dates. */
export function listQuery<Q extends WireList>(query: Q): Omit<Q, 'cursor' | 'since' | 'until'> & PageRequest & TimeRange {
  const { cursor, since, until, ...filters } = query;
  return {
    ...filters,
    ...(cursor !== undefined ? { after: decodeCursor(cursor) } : {}),
    ...(since !== undefined ? { since: parseTimestamp(since, 'since') } : {}),
    ...(until !== undefined ? { until: parseTimestamp(until, 'until') } : {}),
  };
}
