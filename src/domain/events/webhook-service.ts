/**
 * Webhook endpoints of a workspace (create, read, update, disable, delete; rotate the secret: webhook-secrets.ts),
 * their deliveries (list, replay one, replay the failed since a time) and the test event (webhook-messages.ts),
 * bound as one service. The secret is sealed at rest and shown once, at creation and at each rotation. Every
 * change writes its audit entry in the same transaction.
 */
import { AppError } from '../../errors.js';
import { newId } from '../../ids.js';
import type { Actor } from '../actor.js';
import { REDACTED } from '../audit/audit-service.js';
import { bindDeps } from '../bind.js';
import type { Page, PageRequest } from '../pagination.js';
import { assertSafeUpstreamUrl } from '../security/upstream-guard.js';
import { isEventType, type EventType } from './event-catalogue.js';
import { get, lockForChange, RESOURCE, type WebhookDeps } from './webhook-lookup.js';
import { getMessage, listMessages, replay, replayFailed, sendTest } from './webhook-messages.js';
import type { WebhookEndpointRow } from './webhook-repo.js';
import { rotateSecret, sealed, signingSecrets } from './webhook-secrets.js';
import { newWebhookSecret } from './webhook-signature.js';

export type { WebhookMessage } from './webhook-messages.js';

const MAX_DESCRIPTION = 500;

interface WebhookEndpointInput {
  url: string;
  description?: string | undefined;
  /** Unset or null: every type. */
  eventTypes?: string[] | null | undefined;
}

interface WebhookEndpointUpdate {
  url?: string | undefined;
  description?: string | undefined;
  eventTypes?: string[] | null | undefined;
  status?: 'ACTIVE' | 'DISABLED' | undefined;
}

function checkedEventTypes(types: string[] | null | undefined): EventType[] | null {
  if (types === undefined || types === null) return null;
  const unknown = types.find((t) => !isEventType(t));
  if (unknown !== undefined) {
    throw new AppError('unknown_event_type', `eventTypes: ${JSON.stringify(unknown)} is not an event type`, { param: 'eventTypes' });
  }
  return [...new Set(types)] as EventType[];
}

function checkedDescription(description: string | undefined): string | undefined {
  if (description !== undefined && description.length > MAX_DESCRIPTION) {
    throw new AppError('invalid_parameter', `description must be at most ${MAX_DESCRIPTION} characters`, { param: 'description' });
  }
  return description;
}

/**
 * The provider base URLs' SSRF guard, naming `url`; plain http only where private upstreams are allowed
 * (a development receiver on this machine).
 */
async function checkedUrl({ config }: WebhookDeps, raw: string): Promise<string> {
  let url: URL;
  try {
    url = await assertSafeUpstreamUrl(raw, { allowPrivate: config.allowPrivateUpstreams });
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    const code = err.code === 'invalid_base_url' ? 'invalid_webhook_url' : err.code;
    throw new AppError(code, err.message.replace(/^baseUrl/, 'url').replace(/ baseUrl /, ' url '), { param: 'url' });
  }
  if (url.protocol !== 'https:' && !config.allowPrivateUpstreams) {
    throw new AppError('invalid_webhook_url', 'url must use https (http only where NEXUS_ALLOW_PRIVATE_UPSTREAMS=true)', {
      param: 'url',
    });
  }
  return url.toString();
}

/** The endpoint and its secret, shown this once. */
async function create(
  deps: WebhookDeps,
  actor: Actor,
  workspaceId: string,
  input: WebhookEndpointInput,
): Promise<{ endpoint: WebhookEndpointRow; secret: string }> {
  const { db, webhookRepo: repo, workspaces, audit, clock } = deps;
  await workspaces.get(actor, workspaceId);
  const eventTypes = checkedEventTypes(input.eventTypes);
  const description = checkedDescription(input.description) ?? '';
  const url = await checkedUrl(deps, input.url);
  const id = newId();
  const secret = newWebhookSecret();
  const now = clock.now();
  const endpoint = await db.transaction(async (tx) => {
    await workspaces.requireWritable(actor, workspaceId, tx);
    const row = await repo.insertEndpoint(
      {
        id,
        workspace_id: workspaceId,
        url,
        description,
        event_types: eventTypes,
        status: 'ACTIVE',
        disabled_reason: null,
        ...sealed(deps, id, secret),
        previous_secrets: [],
        failing_since: null,
        created_at: now,
        updated_at: now,
        deleted_at: null,
      },
      tx,
    );
    await audit.record(
      actor,
      {
        action: 'webhook_endpoint.created',
        resourceType: RESOURCE,
        resourceId: id,
        workspaceId,
        changes: { url, description, eventTypes, secret: REDACTED },
      },
      tx,
    );
    return row;
  });
  return { endpoint, secret };
}

async function list(
  { webhookRepo, workspaces }: WebhookDeps,
  actor: Actor,
  workspaceId: string,
  page: PageRequest,
): Promise<Page<WebhookEndpointRow>> {
  await workspaces.get(actor, workspaceId);
  return webhookRepo.listEndpoints(workspaceId, page);
}

/** The columns an update sets. */
function patchOf(
  input: WebhookEndpointUpdate,
  url: string | undefined,
  description: string | undefined,
  eventTypes: EventType[] | null | undefined,
  now: Date,
): Partial<WebhookEndpointRow> {
  const patch: Partial<WebhookEndpointRow> = { updated_at: now };
  if (url !== undefined) patch.url = url;
  if (description !== undefined) patch.description = description;
  if (eventTypes !== undefined) patch.event_types = eventTypes;
  if (input.status !== undefined) {
    patch.status = input.status;
    // Enabled again: the failure window starts afresh.
    patch.disabled_reason = input.status === 'DISABLED' ? 'admin' : null;
    if (input.status === 'ACTIVE') patch.failing_since = null;
  }
  return patch;
}

async function update(deps: WebhookDeps, actor: Actor, id: string, input: WebhookEndpointUpdate): Promise<WebhookEndpointRow> {
  const { db, webhookRepo: repo, audit, clock } = deps;
  const eventTypes = input.eventTypes === undefined ? undefined : checkedEventTypes(input.eventTypes);
  const description = checkedDescription(input.description);
  await get(deps, actor, id);
  const url = input.url === undefined ? undefined : await checkedUrl(deps, input.url);
  return db.transaction(async (tx) => {
    await lockForChange(deps, actor, id, tx);
    const row = await repo.updateEndpoint(id, patchOf(input, url, description, eventTypes, clock.now()), tx);
    await audit.record(
      actor,
      {
        action: 'webhook_endpoint.updated',
        resourceType: RESOURCE,
        resourceId: id,
        workspaceId: row.workspace_id,
        changes: { ...input },
      },
      tx,
    );
    return row;
  });
}

async function disable(deps: WebhookDeps, actor: Actor, id: string): Promise<WebhookEndpointRow> {
  const { db, webhookRepo: repo, audit, clock } = deps;
  return db.transaction(async (tx) => {
    await lockForChange(deps, actor, id, tx);
    const row = await repo.updateEndpoint(id, { status: 'DISABLED', disabled_reason: 'admin', updated_at: clock.now() }, tx);
    await repo.failPending(id, tx);
    await audit.record(
      actor,
      { action: 'webhook_endpoint.disabled', resourceType: RESOURCE, resourceId: id, workspaceId: row.workspace_id },
      tx,
    );
    return row;
  });
}

/** Gone for good: nothing more is queued or sent to it; its deliveries stay in the database. */
async function remove(deps: WebhookDeps, actor: Actor, id: string): Promise<void> {
  const { db, webhookRepo: repo, audit, clock } = deps;
  await db.transaction(async (tx) => {
    const current = await lockForChange(deps, actor, id, tx);
    const now = clock.now();
    await repo.updateEndpoint(id, { status: 'DISABLED', disabled_reason: 'deleted', deleted_at: now, updated_at: now }, tx);
    await repo.failPending(id, tx);
    await audit.record(
      actor,
      { action: 'webhook_endpoint.deleted', resourceType: RESOURCE, resourceId: id, workspaceId: current.workspace_id },
      tx,
    );
  });
}

export const createWebhookService = (deps: WebhookDeps) =>
  bindDeps(deps, {
    get,
    create,
    list,
    update,
    disable,
    delete: remove,
    rotateSecret,
    signingSecrets,
    listMessages,
    getMessage,
    replay,
    replayFailed,
    sendTest,
  });

export type WebhookService = ReturnType<typeof createWebhookService>;
