/**
 * The webhook inbox. Receiving: the signature is checked on the raw body, the
 * verified event is stored first (deduplicated by the provider's event id) and
 * answered; processing follows, right after the answer and again from a periodic
 * pass, so a crash between the two leaves a RECEIVED row, never a lost event.
 * Events are signals: the processor re-reads the subscription from the provider
 * when the connection has a credential, and falls back to the event's payload
 * (ordered by its source time) when it has none.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Db } from '../../db/database.js';
import { AppError } from '../../errors.js';
import { isUuid, newId } from '../../ids.js';
import type { Logger } from '../../observability/logger.js';
import { assertVisible, systemActor, type Actor, type Clock } from '../actor.js';
import type { AuditService } from '../audit/audit-service.js';
import { bindDeps } from '../bind.js';
import type { Page, PageRequest } from '../pagination.js';
import type { SecretBox } from '../security/secret-box.js';
import type { WorkspaceService } from '../workspaces/workspace-service.js';
import type { BillingConnectionRow, BillingRepo, RejectionCountRow, WebhookEventRow, WebhookEventStatus } from './billing-repo.js';
import { openWebhookSecrets } from './billing-secrets.js';
import { ProviderError, type BillingProviderClient, type SubscriptionState } from './billing-types.js';
import { envelopeOf, signalOf } from './inbox-signals.js';
import type { Projector } from './projection.js';
import { BILLING_ACTOR } from './projection-rules.js';
import { verifyPaddleSignature, verifyStripeSignature } from './signature.js';

/** A PROCESSING row older than this is taken to belong to a processor that died. */
const STALE_PROCESSING_MS = 5 * 60_000;
/**
 * A FAILED event is retried by the periodic pass up to this many attempts in all (2, 4,
 * 8, 16 minutes apart): the provider will not resend it (it was answered 2xx, and a resend
 * would be a duplicate). After that, replayBillingWebhookEvent.
 */
const MAX_AUTOMATIC_ATTEMPTS = 5;
const KEPT_HEADERS = ['content-type', 'content-length', 'user-agent'];

/** A short message for last_error: never a body, never a secret. */
function describe(err: unknown): string {
  if (err instanceof AppError || err instanceof ProviderError)
    return `${err instanceof AppError ? err.code : `provider_${err.kind}`}: ${err.message}`.slice(0, 500);
  return 'internal_error: processing failed; the log has the cause';
}

/** What the inbox reads and writes through. */
interface InboxDeps {
  db: Db;
  repo: BillingRepo;
  projector: Projector;
  secretBox: SecretBox;
  audit: AuditService;
  workspaces: WorkspaceService;
  clock: Clock;
  logger: Logger;
  clientFor: (conn: BillingConnectionRow) => BillingProviderClient | null;
}

/** The inbox of one process: its dependencies, and what it holds between calls. */
interface Inbox extends InboxDeps {
  /** The processing started after answering webhooks, until it ends. */
  inflight: Set<Promise<void>>;
  /**
   * Deliveries refused for their signature, counted here and written by flushRejections(): an
   * unauthenticated flood of bad signatures costs no database write per delivery, and leaves
   * one row per connection, reason and UTC day, not one per delivery.
   */
  rejected: Map<string, RejectionCountRow>;
}

function countRejection({ rejected }: Inbox, conn: BillingConnectionRow, reason: string, bodyBytes: number, at: Date): void {
  const day = at.toISOString().slice(0, 10);
  const key = `${conn.id} ${reason} ${day}`;
  const known = rejected.get(key);
  if (known) {
    known.count++;
    known.last_body_bytes = bodyBytes;
    known.last_received_at = at;
    return;
  }
  rejected.set(key, {
    billing_connection_id: conn.id,
    workspace_id: conn.workspace_id,
    reason,
    day,
    count: 1,
    last_body_bytes: bodyBytes,
    last_received_at: at,
  });
}

function track({ inflight }: Inbox, p: Promise<void>): void {
  inflight.add(p);
  void p.finally(() => inflight.delete(p));
}

async function handle(
  { db, repo, projector, clientFor }: Inbox,
  conn: BillingConnectionRow,
  event: WebhookEventRow,
  actor: Actor,
): Promise<{ ignored: string | null }> {
  if (conn.status === 'DISABLED') return { ignored: 'connection_disabled' };
  // An archived workspace is read-only: its events are kept but change nothing, and the
  // provider is not asked (the projector checks again, under a lock, before applying).
  if (await repo.workspaceArchived(conn.workspace_id)) return { ignored: 'workspace_archived' };
  const body = JSON.parse(event.raw_body);
  const signal = signalOf(conn.provider, body);
  if (!signal) return { ignored: `unhandled_event_type: ${event.event_type}` };
  const client = clientFor(conn);
  let state: SubscriptionState | null;
  if (client) {
    state = await client.getSubscription(signal.subscriptionId);
    if (!state) return { ignored: 'subscription_unknown_to_provider' };
  } else {
    state = signal.payloadState;
    if (!state) return { ignored: 'no_subscription_state_without_credential' };
  }
  const s = state;
  const result = await db.transaction((tx) => projector.apply(conn, s, { actor, accessIdHint: signal.accessIdHint }, tx));
  return { ignored: result.outcome === 'ignored' ? (result.ignoredReason ?? 'ignored') : null };
}

async function processEvent(inbox: Inbox, eventId: string, opts: { from?: WebhookEventStatus[] } = {}): Promise<void> {
  const { repo, clock, logger } = inbox;
  const now = clock.now();
  const claimed = await repo.claimEvent(eventId, opts.from ?? ['RECEIVED'], new Date(now.getTime() - STALE_PROCESSING_MS), now);
  if (!claimed) return;
  const conn = (await repo.findConnection(claimed.billing_connection_id))!;
  const actor = systemActor(BILLING_ACTOR, `webhook:${claimed.id}`);
  try {
    const { ignored } = await handle(inbox, conn, claimed, actor);
    await repo.finishEvent(claimed.id, { status: ignored ? 'IGNORED' : 'PROCESSED', last_error: ignored, processed_at: clock.now() });
  } catch (err) {
    logger.warn({
      msg: 'billing webhook processing failed',
      eventId: claimed.id,
      connectionId: conn.id,
      type: claimed.event_type,
      attempt: claimed.attempts,
      error: describe(err),
      ...(err instanceof AppError || err instanceof ProviderError ? {} : { cause: (err as Error)?.message }),
    });
    await repo.finishEvent(claimed.id, { status: 'FAILED', last_error: describe(err), processed_at: null });
  }
}

/** Processes what is pending or due for a retry (after waiting for in-flight work): tests call it to be deterministic. */
async function processPending(inbox: Inbox, limit = 500): Promise<number> {
  await drain(inbox);
  const now = inbox.clock.now();
  const ids = await inbox.repo.pendingEventIds(new Date(now.getTime() - STALE_PROCESSING_MS), now, MAX_AUTOMATIC_ATTEMPTS, limit);
  for (const id of ids) await processEvent(inbox, id, { from: ['RECEIVED', 'FAILED'] });
  return ids.length;
}

/** Writes the refused deliveries counted since the last call (the periodic pass, shutdown, tests). */
async function flushRejections({ rejected, repo, logger }: Inbox): Promise<void> {
  if (!rejected.size) return;
  const rows = [...rejected.values()];
  rejected.clear();
  try {
    await repo.addRejectionCounts(rows);
  } catch (err) {
    logger.error({ msg: 'could not write the counts of refused webhook deliveries', cause: (err as Error)?.message });
  }
}

/** Waits for the processing started after answering webhooks. */
async function drain({ inflight }: Inbox): Promise<void> {
  while (inflight.size) await Promise.allSettled([...inflight]);
}

/**
 * The signature, checked on the raw body against each webhook secret in force; a refusal is
 * counted (written later, by flushRejections) and answered 400. Returns the secret that verified.
 */
function verifySignature(
  inbox: Inbox,
  conn: BillingConnectionRow,
  rawBody: Buffer,
  headers: IncomingHttpHeaders,
  now: Date,
): { headerName: string; verifiedWith: WebhookEventRow['verified_with'] } {
  const headerName = conn.provider === 'STRIPE' ? 'stripe-signature' : 'paddle-signature';
  const raw = headers[headerName];
  const header = Array.isArray(raw) ? raw[0] : raw;
  const secrets = openWebhookSecrets(inbox.secretBox, conn, now);
  const verify = conn.provider === 'STRIPE' ? verifyStripeSignature : verifyPaddleSignature;
  const result = secrets.length
    ? verify(
        rawBody,
        header,
        secrets.map((s) => s.secret),
        now,
      )
    : ({ ok: false, reason: 'no_webhook_secret' } as const);
  if (!result.ok) {
    countRejection(inbox, conn, result.reason, rawBody.length, now);
    throw new AppError('invalid_signature', `The webhook signature is missing or invalid (${result.reason})`, { param: headerName });
  }
  return { headerName, verifiedWith: secrets[result.secretIndex ?? 0]?.previous ? 'PREVIOUS_SECRET' : 'CURRENT_SECRET' };
}

/** The headers kept with an event: a few harmless ones, and the signature's name with its value redacted. */
function keptHeaders(headers: IncomingHttpHeaders, headerName: string): Record<string, string> {
  const kept: Record<string, string> = { [headerName]: '[redacted]' };
  for (const name of KEPT_HEADERS) {
    const v = headers[name];
    if (typeof v === 'string') kept[name] = v.slice(0, 300);
  }
  return kept;
}

async function receive(
  inbox: Inbox,
  connectionId: string,
  rawBody: Buffer,
  headers: IncomingHttpHeaders,
): Promise<{ received: true; duplicate: boolean }> {
  const { repo, clock, logger } = inbox;
  if (!isUuid(connectionId)) throw new AppError('billing_connection_not_found', 'Billing connection not found');
  const conn = await repo.findConnection(connectionId);
  if (!conn) throw new AppError('billing_connection_not_found', 'Billing connection not found');
  const now = clock.now();
  const { headerName, verifiedWith } = verifySignature(inbox, conn, rawBody, headers, now);
  let body: unknown;
  try {
    body = JSON.parse(rawBody.toString('utf8'));
  } catch {
    throw new AppError('invalid_json', 'The webhook body is not valid JSON');
  }
  const envelope = envelopeOf(conn.provider, body);
  if (!envelope) throw new AppError('invalid_request', 'The webhook body has no event id or type');
  const stored = await repo.insertEventIfNew({
    id: newId(),
    workspace_id: conn.workspace_id,
    billing_connection_id: conn.id,
    provider_event_id: envelope.eventId,
    event_type: envelope.type,
    provider_created_at: envelope.createdAt,
    raw_body: rawBody.toString('utf8'),
    headers: keptHeaders(headers, headerName),
    verified_with: verifiedWith,
    status: 'RECEIVED',
    attempts: 0,
    last_error: null,
    received_at: now,
    processing_started_at: null,
    processed_at: null,
  });
  if (stored) {
    // After the answer: the provider is not kept waiting on our processing.
    track(
      inbox,
      new Promise<void>((resolve) => setImmediate(resolve)).then(() =>
        processEvent(inbox, stored.id).catch((err) => {
          logger.error({ msg: 'billing webhook processing crashed', eventId: stored.id, cause: (err as Error)?.message });
        }),
      ),
    );
  }
  return { received: true, duplicate: !stored };
}

async function list(
  { repo }: Inbox,
  actor: Actor,
  connectionId: string,
  filter: PageRequest & { status?: WebhookEventStatus | undefined; type?: string | undefined },
): Promise<Page<WebhookEventRow>> {
  const conn = await repo.findConnection(connectionId);
  if (!conn) throw new AppError('billing_connection_not_found', 'Billing connection not found');
  assertVisible(actor, conn.workspace_id, 'billing_connection_not_found', 'Billing connection');
  return repo.listEvents({ ...filter, connectionId });
}

/**
 * Reprocesses a FAILED event from its stored body: no new signature check, no freshness window.
 * A change like any: refused (409) under an archived workspace.
 */
async function replay(inbox: Inbox, actor: Actor, eventId: string): Promise<{ operationId: string }> {
  const { db, repo, workspaces, audit } = inbox;
  const event = await repo.findEvent(eventId);
  if (!event) throw new AppError('webhook_event_not_found', 'Webhook event not found');
  assertVisible(actor, event.workspace_id, 'webhook_event_not_found', 'Webhook event');
  await db.transaction(async (tx) => {
    await workspaces.requireWritable(actor, event.workspace_id, tx);
    if (event.status !== 'FAILED') {
      throw new AppError('event_not_replayable', `Only FAILED events can be replayed; this one is ${event.status}`, {
        current_status: event.status,
      });
    }
    await audit.record(
      actor,
      {
        action: 'billing_webhook_event.replayed',
        resourceType: 'billing_webhook_event',
        resourceId: event.id,
        workspaceId: event.workspace_id,
        changes: { attempts: event.attempts },
      },
      tx,
    );
  });
  await processEvent(inbox, event.id, { from: ['FAILED'] });
  return { operationId: event.id };
}

export function createInbox(deps: InboxDeps) {
  const inbox: Inbox = { ...deps, inflight: new Set(), rejected: new Map() };
  return bindDeps(inbox, { processEvent, processPending, flushRejections, drain, receive, list, replay });
}
