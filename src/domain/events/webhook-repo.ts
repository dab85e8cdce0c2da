/**
 * All SQL of the webhook tables: endpoints, messages (one per event and endpoint), attempts; and the
 * delivery workers' claim, which any number of processes run at once (SKIP LOCKED).
 */
import type { Queryable } from '../../db/database.js';
import { table } from '../../db/table.js';
import { bindDeps } from '../bind.js';
import { paginate, type Page, type PageRequest } from '../pagination.js';
import type { EventType } from './event-catalogue.js';

type WebhookEndpointStatus = 'ACTIVE' | 'DISABLED';
export type WebhookMessageStatus = 'PENDING' | 'DELIVERED' | 'FAILED';

/** A secret rotated out, sealed, and until when it still signs (RFC 3339). */
export interface RotatedSecret {
  ciphertext: string;
  keyId: string;
  expiresAt: string;
}

export interface WebhookEndpointRow {
  id: string;
  workspace_id: string;
  url: string;
  description: string;
  event_types: EventType[] | null;
  status: WebhookEndpointStatus;
  disabled_reason: string | null;
  secret_ciphertext: string;
  secret_key_id: string;
  /** The secrets rotated out, newest first; those whose overlap still runs sign beside the current one. */
  previous_secrets: RotatedSecret[];
  failing_since: Date | null;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
}

export interface WebhookMessageRow {
  event_id: string;
  endpoint_id: string;
  workspace_id: string;
  status: WebhookMessageStatus;
  attempt_count: number;
  next_attempt_at: Date | null;
  last_attempt_at: Date | null;
  created_at: Date;
  type: EventType;
  data: Record<string, unknown>;
}

export interface WebhookAttemptRow {
  id: string;
  event_id: string;
  endpoint_id: string;
  workspace_id: string;
  outcome: 'SUCCEEDED' | 'FAILED';
  response_status: number | null;
  response_body: string | null;
  latency_ms: number;
  error: string | null;
  created_at: Date;
}

/** A claimed message with what its delivery needs: its event and its endpoint. */
export interface ClaimedMessage {
  event_id: string;
  endpoint_id: string;
  workspace_id: string;
  attempt_count: number;
  created_at: Date;
  type: EventType;
  data: Record<string, unknown>;
  event_created_at: Date;
  url: string;
  endpoint_status: WebhookEndpointStatus;
  deleted_at: Date | null;
  secret_ciphertext: string;
  secret_key_id: string;
  previous_secrets: RotatedSecret[];
  failing_since: Date | null;
}

/** Due first, then oldest first: messages made due together (by a success to their endpoint) go in their order. */
const CLAIM_SQL = `
with due as (
  select event_id, endpoint_id from webhook_messages
   where status = 'PENDING' and next_attempt_at <= ?
   order by next_attempt_at, created_at, event_id
   limit ?
   for update skip locked
), claimed as (
  update webhook_messages m set next_attempt_at = ?, claimed_until = ?
    from due where m.event_id = due.event_id and m.endpoint_id = due.endpoint_id
  returning m.event_id, m.endpoint_id, m.workspace_id, m.attempt_count, m.created_at
)
select c.*, e.type, e.data, e.created_at as event_created_at, ep.url, ep.status as endpoint_status, ep.deleted_at,
       ep.secret_ciphertext, ep.secret_key_id, ep.previous_secrets, ep.failing_since
  from claimed c join events e on e.id = c.event_id join webhook_endpoints ep on ep.id = c.endpoint_id
 order by c.created_at, c.event_id`;

/** The JSON columns as JSON text: event_types' null (every type) as SQL NULL, not as the JSON value null. */
function columns<T extends Partial<WebhookEndpointRow>>(row: T): T {
  const out: Record<string, unknown> = { ...row };
  if (row.event_types !== undefined) out.event_types = row.event_types === null ? null : JSON.stringify(row.event_types);
  if (row.previous_secrets !== undefined) out.previous_secrets = JSON.stringify(row.previous_secrets);
  return out as T;
}

const key = (eventId: string, endpointId: string) => ({ event_id: eventId, endpoint_id: endpointId });

async function findEndpoint(db: Queryable, id: string, q: Queryable = db): Promise<WebhookEndpointRow | undefined> {
  return q('webhook_endpoints').where({ id }).whereNull('deleted_at').first();
}

async function listEndpoints(db: Queryable, workspaceId: string, page: PageRequest, q: Queryable = db): Promise<Page<WebhookEndpointRow>> {
  return paginate(q('webhook_endpoints').where({ workspace_id: workspaceId }).whereNull('deleted_at'), page);
}

async function listMessages(
  db: Queryable,
  endpointId: string,
  filter: { status?: WebhookMessageStatus | undefined; since?: Date | undefined },
  page: PageRequest,
  q: Queryable = db,
): Promise<Page<WebhookMessageRow>> {
  const query = q('webhook_messages as m')
    .join('events as e', 'e.id', 'm.event_id')
    .where('m.endpoint_id', endpointId)
    .select('m.*', 'e.type', 'e.data');
  if (filter.status) query.where('m.status', filter.status);
  if (filter.since) query.where('m.created_at', '>=', filter.since);
  return paginate(query, page, 'm.event_id');
}

async function findMessage(db: Queryable, eventId: string, endpointId: string, q: Queryable = db): Promise<WebhookMessageRow | undefined> {
  return q('webhook_messages as m')
    .join('events as e', 'e.id', 'm.event_id')
    .where({ 'm.event_id': eventId, 'm.endpoint_id': endpointId })
    .select('m.*', 'e.type', 'e.data')
    .first();
}

async function attemptsOf(db: Queryable, endpointId: string, eventIds: string[], q: Queryable = db): Promise<WebhookAttemptRow[]> {
  if (eventIds.length === 0) return [];
  return q('webhook_attempts').where('endpoint_id', endpointId).whereIn('event_id', eventIds).orderBy('id', 'asc');
}

/** Queues a message again, now: its id stays the event's. */
async function requeue(db: Queryable, eventId: string, endpointId: string, now: Date, q: Queryable = db): Promise<void> {
  await q('webhook_messages').where(key(eventId, endpointId)).update({ status: 'PENDING', next_attempt_at: now });
}

/** Queues again every FAILED message of the endpoint created at or after `since`; how many. */
async function requeueFailed(db: Queryable, endpointId: string, since: Date, now: Date, q: Queryable = db): Promise<number> {
  return q('webhook_messages')
    .where({ endpoint_id: endpointId, status: 'FAILED' })
    .where('created_at', '>=', since)
    .update({ status: 'PENDING', next_attempt_at: now });
}

/**
 * Due messages, oldest first, claimed until `until` (a process that dies with them leaves them to another after
 * that).
 */
async function claimDue(db: Queryable, now: Date, until: Date, limit: number, q: Queryable = db): Promise<ClaimedMessage[]> {
  const result = await q.raw<{ rows: ClaimedMessage[] }>(CLAIM_SQL, [now, limit, until, until]);
  return result.rows;
}

/**
 * The endpoint's pending messages waiting for a later attempt, due at `now` (a delivery to it just succeeded):
 * not those a worker is sending (under a claim that still runs).
 */
async function wakePending(db: Queryable, endpointId: string, now: Date, q: Queryable = db): Promise<number> {
  return q('webhook_messages')
    .where({ endpoint_id: endpointId, status: 'PENDING' })
    .where('next_attempt_at', '>', now)
    .where((w) => void w.whereNull('claimed_until').orWhere('claimed_until', '<=', now))
    .update({ next_attempt_at: now });
}

async function recordAttempt(db: Queryable, attempt: WebhookAttemptRow, q: Queryable = db): Promise<void> {
  await q('webhook_attempts').insert(attempt);
}

/** What became of a claimed message (its attempt, or its endpoint gone): its claim ends with it. */
async function updateMessage(
  db: Queryable,
  eventId: string,
  endpointId: string,
  patch: Partial<Pick<WebhookMessageRow, 'status' | 'attempt_count' | 'next_attempt_at' | 'last_attempt_at'>>,
  q: Queryable = db,
): Promise<void> {
  await q('webhook_messages')
    .where(key(eventId, endpointId))
    .update({ ...patch, claimed_until: null });
}

/**
 * A claim given back (its send was cut by the process's stop): due again at `due`, if the message is still
 * pending under this claim (`claimedUntil`, the next attempt the claim set).
 */
async function releaseClaim(
  db: Queryable,
  eventId: string,
  endpointId: string,
  claimedUntil: Date,
  due: Date,
  q: Queryable = db,
): Promise<void> {
  await q('webhook_messages')
    .where({ ...key(eventId, endpointId), status: 'PENDING', next_attempt_at: claimedUntil })
    .update({ next_attempt_at: due, claimed_until: null });
}

/** The endpoint's messages still queued fail with it (a replay queues them again). */
async function failPending(db: Queryable, endpointId: string, q: Queryable = db): Promise<void> {
  await q('webhook_messages').where({ endpoint_id: endpointId, status: 'PENDING' }).update({ status: 'FAILED', next_attempt_at: null });
}

/** Every statement of the webhook tables, on `db` unless given a transaction. */
export function createWebhookRepo(db: Queryable) {
  const endpoints = table<WebhookEndpointRow>(db, 'webhook_endpoints');
  return {
    insertEndpoint: (row: WebhookEndpointRow, q: Queryable = db) => endpoints.insert(columns(row), q),
    updateEndpoint: (id: string, patch: Partial<WebhookEndpointRow>, q: Queryable = db) => endpoints.updateById(id, columns(patch), q),
    findEndpointForUpdate: endpoints.findByIdForUpdate,
    ...bindDeps(db, {
      findEndpoint,
      listEndpoints,
      listMessages,
      findMessage,
      attemptsOf,
      requeue,
      requeueFailed,
      claimDue,
      wakePending,
      recordAttempt,
      updateMessage,
      releaseClaim,
      failPending,
    }),
  };
}

export type WebhookRepo = ReturnType<typeof createWebhookRepo>;
