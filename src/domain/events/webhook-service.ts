/**
 * Webhook endpoints of a workspace (create, read, update, disable, delete, rotate the secret), their
 * deliveries (list, replay one, replay the failed since a time) and the test event. The secret is sealed
 * at rest and shown once, at creation and at each rotation. Every change writes its audit entry in the
 * same transaction.
 */
import type { Config } from '../../config.js';
import type { Db, Queryable } from '../../db/database.js';
import { AppError } from '../../errors.js';
import { newId } from '../../ids.js';
import { canSeeWorkspace, type Actor, type Clock } from '../actor.js';
import { REDACTED, type AuditService } from '../audit/audit-service.js';
import type { Page, PageRequest } from '../pagination.js';
import { assertSafeUpstreamUrl } from '../security/upstream-guard.js';
import type { SecretBox } from '../security/secret-box.js';
import type { WorkspaceService } from '../workspaces/workspace-service.js';
import { isEventType, type EventType } from './event-catalogue.js';
import type { Events } from './outbox.js';
import type {
  RotatedSecret,
  WebhookAttemptRow,
  WebhookEndpointRow,
  WebhookMessageRow,
  WebhookMessageStatus,
  WebhookRepo,
} from './webhook-repo.js';
import { newWebhookSecret } from './webhook-signature.js';

const RESOURCE = 'webhook_endpoint';
const MAX_DESCRIPTION = 500;
/**
 * The most secrets that sign a delivery at once: the current one and those rotated out whose overlap still runs. A
 * rotation that would make more is refused (409): each is a signature in every delivery's header.
 */
const MAX_SIGNING_SECRETS = 10;

export interface WebhookEndpointInput {
  url: string;
  description?: string | undefined;
  /** Unset or null: every type. */
  eventTypes?: string[] | null | undefined;
}

export interface WebhookEndpointUpdate {
  url?: string | undefined;
  description?: string | undefined;
  eventTypes?: string[] | null | undefined;
  status?: 'ACTIVE' | 'DISABLED' | undefined;
}

export interface WebhookMessage extends WebhookMessageRow {
  attempts: WebhookAttemptRow[];
}

const notFound = () => new AppError('webhook_endpoint_not_found', 'Webhook endpoint not found');

/** The associated data binding a sealed secret to its endpoint (and to its slot: current, or one rotated out). */
const secretAad = (endpointId: string, slot: 'current' | 'previous') => `webhook_endpoint:${endpointId}:${slot}`;

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

export function createWebhookService(deps: {
  db: Db;
  webhookRepo: WebhookRepo;
  workspaces: WorkspaceService;
  audit: AuditService;
  secretBox: SecretBox;
  events: Events;
  config: Config;
  clock: Clock;
}) {
  const { db, webhookRepo: repo, workspaces, audit, secretBox, events, config, clock } = deps;

  /**
   * The provider base URLs' SSRF guard, naming `url`; plain http only where private upstreams are allowed
   * (a development receiver on this machine).
   */
  async function checkedUrl(raw: string): Promise<string> {
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

  function sealed(endpointId: string, secret: string) {
    const s = secretBox.seal(secret, secretAad(endpointId, 'current'));
    return { secret_ciphertext: s.ciphertext, secret_key_id: s.keyId };
  }

  async function get(actor: Actor, id: string, q: Queryable = db): Promise<WebhookEndpointRow> {
    const row = await repo.findEndpoint(id, q);
    if (!row || !canSeeWorkspace(actor, row.workspace_id)) throw notFound();
    return row;
  }

  async function lockForChange(actor: Actor, id: string, tx: Queryable): Promise<WebhookEndpointRow> {
    const seen = await get(actor, id, tx);
    await workspaces.requireWritable(actor, seen.workspace_id, tx);
    const row = await repo.findEndpointForUpdate(id, tx);
    if (!row || row.deleted_at) throw notFound();
    return row;
  }

  async function messageOf(actor: Actor, endpointId: string, eventId: string, q: Queryable = db): Promise<WebhookMessageRow> {
    await get(actor, endpointId, q);
    const message = await repo.findMessage(eventId, endpointId, q);
    if (!message) throw new AppError('webhook_message_not_found', 'Webhook message not found');
    return message;
  }

  return {
    get,

    /** The endpoint and its secret, shown this once. */
    async create(
      actor: Actor,
      workspaceId: string,
      input: WebhookEndpointInput,
    ): Promise<{ endpoint: WebhookEndpointRow; secret: string }> {
      await workspaces.get(actor, workspaceId);
      const eventTypes = checkedEventTypes(input.eventTypes);
      const description = checkedDescription(input.description) ?? '';
      const url = await checkedUrl(input.url);
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
            ...sealed(id, secret),
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
    },

    async list(actor: Actor, workspaceId: string, page: PageRequest): Promise<Page<WebhookEndpointRow>> {
      await workspaces.get(actor, workspaceId);
      return repo.listEndpoints(workspaceId, page);
    },

    async update(actor: Actor, id: string, input: WebhookEndpointUpdate): Promise<WebhookEndpointRow> {
      const eventTypes = input.eventTypes === undefined ? undefined : checkedEventTypes(input.eventTypes);
      const description = checkedDescription(input.description);
      await get(actor, id);
      const url = input.url === undefined ? undefined : await checkedUrl(input.url);
      return db.transaction(async (tx) => {
        await lockForChange(actor, id, tx);
        const patch: Partial<WebhookEndpointRow> = { updated_at: clock.now() };
        if (url !== undefined) patch.url = url;
        if (description !== undefined) patch.description = description;
        if (eventTypes !== undefined) patch.event_types = eventTypes;
        if (input.status !== undefined) {
          patch.status = input.status;
          // Enabled again: the failure window starts afresh.
          patch.disabled_reason = input.status === 'DISABLED' ? 'admin' : null;
          if (input.status === 'ACTIVE') patch.failing_since = null;
        }
        const row = await repo.updateEndpoint(id, patch, tx);
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
    },

    async disable(actor: Actor, id: string): Promise<WebhookEndpointRow> {
      return db.transaction(async (tx) => {
        await lockForChange(actor, id, tx);
        const row = await repo.updateEndpoint(id, { status: 'DISABLED', disabled_reason: 'admin', updated_at: clock.now() }, tx);
        await repo.failPending(id, tx);
        await audit.record(
          actor,
          { action: 'webhook_endpoint.disabled', resourceType: RESOURCE, resourceId: id, workspaceId: row.workspace_id },
          tx,
        );
        return row;
      });
    },

    /** Gone for good: nothing more is queued or sent to it; its deliveries stay in the database. */
    async delete(actor: Actor, id: string): Promise<void> {
      await db.transaction(async (tx) => {
        const current = await lockForChange(actor, id, tx);
        const now = clock.now();
        await repo.updateEndpoint(id, { status: 'DISABLED', disabled_reason: 'deleted', deleted_at: now, updated_at: now }, tx);
        await repo.failPending(id, tx);
        await audit.record(
          actor,
          { action: 'webhook_endpoint.deleted', resourceType: RESOURCE, resourceId: id, workspaceId: current.workspace_id },
          tx,
        );
      });
    },

    /**
     * A new secret, shown once. The one it replaces still signs beside it for the overlap, as do those rotated out
     * before whose overlap still runs: a second rotation within a day ends no secret early. More than
     * MAX_SIGNING_SECRETS at once is refused.
     */
    async rotateSecret(actor: Actor, id: string): Promise<{ endpoint: WebhookEndpointRow; secret: string }> {
      const secret = newWebhookSecret();
      return db.transaction(async (tx) => {
        const current = await lockForChange(actor, id, tx);
        const now = clock.now();
        const stillSigning = current.previous_secrets.filter((s) => Date.parse(s.expiresAt) > now.getTime());
        if (stillSigning.length + 2 > MAX_SIGNING_SECRETS) {
          const until = new Date(Math.min(...stillSigning.map((s) => Date.parse(s.expiresAt)))).toISOString();
          throw new AppError(
            'too_many_webhook_secrets',
            `${stillSigning.length + 1} secrets of this endpoint sign its deliveries, the most there may be; ` +
              `the oldest rotated out stops signing at ${until}: rotate after that`,
          );
        }
        const old = secretBox.open({ keyId: current.secret_key_id, ciphertext: current.secret_ciphertext }, secretAad(id, 'current'));
        const resealed = secretBox.seal(old, secretAad(id, 'previous'));
        const expiresAt = new Date(now.getTime() + config.eventsSecretOverlapMs);
        const rotatedOut: RotatedSecret = { ciphertext: resealed.ciphertext, keyId: resealed.keyId, expiresAt: expiresAt.toISOString() };
        const endpoint = await repo.updateEndpoint(
          id,
          { ...sealed(id, secret), previous_secrets: [rotatedOut, ...stillSigning], updated_at: now },
          tx,
        );
        await audit.record(
          actor,
          {
            action: 'webhook_endpoint.secret_rotated',
            resourceType: RESOURCE,
            resourceId: id,
            workspaceId: current.workspace_id,
            changes: { secret: REDACTED, previousSecretValidUntil: expiresAt.toISOString(), secretsSigning: stillSigning.length + 2 },
          },
          tx,
        );
        return { endpoint, secret };
      });
    },

    /** The secrets that sign a delivery now: the current one, then those rotated out whose overlap runs, newest first. */
    signingSecrets(row: Pick<WebhookEndpointRow, 'id' | 'secret_ciphertext' | 'secret_key_id' | 'previous_secrets'>, now: Date): string[] {
      const secrets = [secretBox.open({ keyId: row.secret_key_id, ciphertext: row.secret_ciphertext }, secretAad(row.id, 'current'))];
      for (const previous of row.previous_secrets) {
        if (Date.parse(previous.expiresAt) <= now.getTime()) continue;
        secrets.push(secretBox.open({ keyId: previous.keyId, ciphertext: previous.ciphertext }, secretAad(row.id, 'previous')));
      }
      return secrets;
    },

    async listMessages(
      actor: Actor,
      endpointId: string,
      filter: { status?: WebhookMessageStatus | undefined; since?: Date | undefined },
      page: PageRequest,
    ): Promise<Page<WebhookMessage>> {
      await get(actor, endpointId);
      const result = await repo.listMessages(endpointId, filter, page);
      const attempts = await repo.attemptsOf(
        endpointId,
        result.items.map((m) => m.event_id),
      );
      return {
        items: result.items.map((m) => ({ ...m, attempts: attempts.filter((a) => a.event_id === m.event_id) })),
        nextAfter: result.nextAfter,
      };
    },

    async getMessage(actor: Actor, endpointId: string, eventId: string): Promise<WebhookMessage> {
      const message = await messageOf(actor, endpointId, eventId);
      return { ...message, attempts: await repo.attemptsOf(endpointId, [eventId]) };
    },

    /** Sends the message again (same webhook-id), whatever became of it. */
    async replay(actor: Actor, endpointId: string, eventId: string): Promise<void> {
      await db.transaction(async (tx) => {
        const endpoint = await lockForChange(actor, endpointId, tx);
        if (endpoint.status !== 'ACTIVE') throw disabled(endpoint);
        await messageOf(actor, endpointId, eventId, tx);
        await repo.requeue(eventId, endpointId, clock.now(), tx);
        await audit.record(
          actor,
          {
            action: 'webhook_message.replayed',
            resourceType: RESOURCE,
            resourceId: endpointId,
            workspaceId: endpoint.workspace_id,
            changes: { messageId: eventId },
          },
          tx,
        );
      });
    },

    /** Every FAILED message created at or after `since`, queued again; how many. */
    async replayFailed(actor: Actor, endpointId: string, since: Date): Promise<number> {
      return db.transaction(async (tx) => {
        const endpoint = await lockForChange(actor, endpointId, tx);
        if (endpoint.status !== 'ACTIVE') throw disabled(endpoint);
        const count = await repo.requeueFailed(endpointId, since, clock.now(), tx);
        await audit.record(
          actor,
          {
            action: 'webhook_message.replayed_failed',
            resourceType: RESOURCE,
            resourceId: endpointId,
            workspaceId: endpoint.workspace_id,
            changes: { since: since.toISOString(), count },
          },
          tx,
        );
        return count;
      });
    },

    /** A webhook.test event to this endpoint alone; the queued message. */
    async sendTest(actor: Actor, endpointId: string): Promise<WebhookMessage> {
      const eventId = await db.transaction(async (tx) => {
        const endpoint = await lockForChange(actor, endpointId, tx);
        if (endpoint.status !== 'ACTIVE') throw disabled(endpoint);
        return events.emitTo(tx, endpoint.workspace_id, endpointId, 'webhook.test', { webhookEndpointId: endpointId });
      });
      return { ...(await messageOf(actor, endpointId, eventId)), attempts: [] };
    },
  };
}

function disabled(endpoint: WebhookEndpointRow): AppError {
  return new AppError('webhook_endpoint_disabled', 'The webhook endpoint is disabled: enable it (status ACTIVE) first', {
    current_status: endpoint.status,
  });
}

export type WebhookService = ReturnType<typeof createWebhookService>;
