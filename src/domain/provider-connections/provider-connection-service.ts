/**
 * Provider connections: create, read, update, archive, test, verify and rotate.
 * The API key is sealed before it reaches a repository and opened only to call
 * the upstream. Every change writes its audit entry in the same transaction;
 * upstream probes run outside any transaction.
 */
import type { Config } from '../../config.js';
import type { Db, Queryable } from '../../db/database.js';
import { AppError } from '../../errors.js';
import { newId } from '../../ids.js';
import { canSeeWorkspace, type Actor, type Clock } from '../actor.js';
import { REDACTED, type AuditService } from '../audit/audit-service.js';
import type { ChangeFeed } from '../changes/change-feed.js';
import type { Events } from '../events/outbox.js';
import type { Page, PageRequest } from '../pagination.js';
import { DEFAULT_CONNECTION_RETRY, type ConnectionRetry } from './connection-retry.js';
import { secretPreview, type SecretBox } from '../security/secret-box.js';
import { assertMetadataSize, type WorkspaceService } from '../workspaces/workspace-service.js';
import type { ProviderConnectionRepo, ProviderConnectionRow, ProviderConnectionStatus } from './provider-connection-repo.js';
import type { AwsFields } from '../../protocols/bedrock-secret.js';
import { connectionSecret, visibleSecret, type ProtocolProfile } from '../../protocols/index.js';
import { probeProvider, type ProviderCheckResult } from './provider-probe.js';
import { openProviderApiKey, sealProviderApiKey } from './provider-secret.js';
import { assertSafeUpstreamUrl } from '../security/upstream-guard.js';

const RESOURCE = 'provider_connection';

export interface CreateConnectionInput extends AwsFields {
  name: string;
  protocolProfile: ProtocolProfile;
  baseUrl: string;
  apiKey: string;
  metadata?: Record<string, unknown> | undefined;
  /** Unset: config.upstreamTimeoutMs. */
  upstreamTimeoutMs?: number | undefined;
  /** Unset: one attempt per call; the fields not given take DEFAULT_CONNECTION_RETRY's. */
  retry?: Partial<ConnectionRetry> | undefined;
  /** Unset: true. False: the upstream may answer past the output cap it is sent. */
  enforcesOutputCap?: boolean | undefined;
}

/** A probe of an upstream with a key that is not saved. */
export type TestConnectionInput = Pick<CreateConnectionInput, 'protocolProfile' | 'baseUrl' | 'apiKey'> & AwsFields;

/** The AWS fields of a new key (a `bedrock` connection's); apiKey is the rest of it. */
export type RotateSecretInput = { apiKey: string } & AwsFields;

export interface UpdateConnectionInput extends AwsFields {
  name?: string | undefined;
  baseUrl?: string | undefined;
  apiKey?: string | undefined;
  status?: 'ACTIVE' | 'SUSPENDED' | undefined;
  metadata?: Record<string, unknown> | undefined;
  /** null: back to config.upstreamTimeoutMs. */
  upstreamTimeoutMs?: number | null | undefined;
  /** The fields given change (from the defaults, if it had none); null: retries off. */
  retry?: Partial<ConnectionRetry> | null | undefined;
  enforcesOutputCap?: boolean | undefined;
}

/** The AWS fields describe a new key: an update that brings them brings apiKey too. */
function assertAwsWithKey(dto: UpdateConnectionInput): void {
  if (dto.apiKey !== undefined) return;
  const field =
    dto.awsRegion !== undefined
      ? 'awsRegion'
      : dto.awsAccessKeyId !== undefined
        ? 'awsAccessKeyId'
        : dto.awsSessionToken !== undefined
          ? 'awsSessionToken'
          : null;
  if (field) throw new AppError('invalid_parameter', `${field} is part of the key: give apiKey with it`, { param: 'apiKey' });
}

/** A create or update as audited: the access key id and the session token are write-only as the key is. */
function redactedAws<T extends AwsFields>(dto: T): T {
  const out = { ...dto };
  if (out.awsAccessKeyId !== undefined) out.awsAccessKeyId = REDACTED;
  if (out.awsSessionToken !== undefined) out.awsSessionToken = REDACTED;
  return out;
}

/** A retry policy from the fields given, the others the current policy's (or the defaults). */
function retryOf(given: Partial<ConnectionRetry>, current?: ConnectionRetry | null): ConnectionRetry {
  const fields = Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined));
  return { ...DEFAULT_CONNECTION_RETRY, ...current, ...fields };
}

function notFound(): AppError {
  return new AppError('provider_connection_not_found', 'Provider connection not found');
}

function archived(row: ProviderConnectionRow): AppError {
  return new AppError('connection_archived', 'The provider connection is archived and read-only', { current_status: row.status });
}

/**
 * baseUrl as stored: the parsed URL without a trailing slash. `/v1` stays out of
 * it: the SDKs and the probe add it, and the gateway appends the caller's path.
 */
export function normalizeBaseUrl(url: URL): string {
  const text = url.href.replace(/\/+$/, '');
  if (/\/v1$/i.test(new URL(text).pathname)) {
    throw new AppError(
      'invalid_base_url',
      'baseUrl must not end in /v1: give the origin (e.g. https://api.openai.com); clients add /v1 themselves',
      {
        param: 'baseUrl',
      },
    );
  }
  return text;
}

/**
 * The stored key goes only to the origin it was given for. Without this, a
 * Management Key that can never read the key (a scoped one) could move baseUrl
 * to its own server and receive the key with the next verify or gateway call.
 */
function assertKeyFollowsOrigin(current: ProviderConnectionRow, baseUrl: string | undefined, apiKey: string | undefined): void {
  if (baseUrl === undefined || apiKey !== undefined) return;
  if (new URL(baseUrl).origin === new URL(current.base_url).origin) return;
  throw new AppError(
    'api_key_required',
    'A baseUrl on another origin (scheme, host or port) needs its apiKey in the same request: the stored key is never sent to a new origin',
    { param: 'apiKey' },
  );
}

export function createProviderConnectionService(deps: {
  db: Db;
  providerConnectionRepo: ProviderConnectionRepo;
  workspaces: WorkspaceService;
  audit: AuditService;
  secretBox: SecretBox;
  config: Config;
  clock: Clock;
  changes: ChangeFeed;
  events: Events;
}) {
  const { db, providerConnectionRepo: repo, workspaces, audit, secretBox, config, clock, changes, events } = deps;

  async function checkedBaseUrl(raw: string): Promise<string> {
    return normalizeBaseUrl(await assertSafeUpstreamUrl(raw, { allowPrivate: config.allowPrivateUpstreams }));
  }

  /**
   * The text a connection of `profile` seals (the key, or its protocol's secret: a `bedrock` connection's
   * credential), and its preview. `current`: the connection whose key it replaces (a bedrock one keeps its region).
   */
  function secretOf(profile: ProtocolProfile, apiKey: string, fields: AwsFields, current?: ProviderConnectionRow) {
    const text = connectionSecret(profile, apiKey, fields, current && (() => openProviderApiKey(secretBox, current)));
    return { text, preview: secretPreview(visibleSecret(profile, text)) };
  }

  /** The columns a new key replaces (rotation, or an update that brings one): sealed, previewed, unverified. */
  function keyReplacement(current: ProviderConnectionRow, apiKey: string, fields: AwsFields) {
    const secret = secretOf(current.protocol_profile, apiKey, fields, current);
    const sealed = sealProviderApiKey(secretBox, current.id, secret.text);
    return {
      api_key_ciphertext: sealed.ciphertext,
      api_key_key_id: sealed.keyId,
      secret_preview: secret.preview,
      last_verified_at: null,
    };
  }

  /** How a key replacement is audited: never the key, both previews. */
  function keyReplaced(newKey: ReturnType<typeof keyReplacement>, current: ProviderConnectionRow) {
    return { apiKey: REDACTED, secretPreview: newKey.secret_preview, previousSecretPreview: current.secret_preview };
  }

  function probe(profile: ProtocolProfile, baseUrl: string, apiKey: string): Promise<ProviderCheckResult> {
    return probeProvider({
      profile,
      baseUrl,
      apiKey,
      timeoutMs: config.providerProbeTimeoutMs,
      allowPrivate: config.allowPrivateUpstreams,
      now: () => clock.now(),
    });
  }

  async function get(actor: Actor, id: string, q: Queryable = db): Promise<ProviderConnectionRow> {
    const row = await repo.findById(id, q);
    if (!row || !canSeeWorkspace(actor, row.workspace_id)) throw notFound();
    return row;
  }

  /**
   * A change to one connection: visible, its workspace writable (share-locked
   * first, as every area does), the row locked and not archived.
   */
  async function lockForChange(actor: Actor, id: string, tx: Queryable): Promise<ProviderConnectionRow> {
    const seen = await get(actor, id, tx);
    await workspaces.requireWritable(actor, seen.workspace_id, tx);
    const row = await repo.findByIdForUpdate(id, tx);
    if (!row) throw notFound();
    if (row.status === 'ARCHIVED') throw archived(row);
    return row;
  }

  /**
   * provider_connection.unhealthy when a verification fails after a healthy (or unknown) state, .recovered when
   * one succeeds after an unhealthy one: the health last announced is kept on the row, so each change is told once.
   */
  async function announceHealth(row: ProviderConnectionRow, result: ProviderCheckResult, tx: Queryable): Promise<void> {
    const health = result.outcome === 'reachable' ? 'HEALTHY' : 'UNHEALTHY';
    if (health === (row.event_health ?? 'HEALTHY')) {
      if (!row.event_health) await repo.update(row.id, { event_health: health }, tx);
      return;
    }
    await repo.update(row.id, { event_health: health }, tx);
    if (health === 'UNHEALTHY') {
      await events.emit(tx, row.workspace_id, 'provider_connection.unhealthy', {
        providerConnectionId: row.id,
        source: 'verification',
        outcome: result.outcome,
        ...(result.httpStatus !== undefined ? { httpStatus: result.httpStatus } : {}),
      });
    } else {
      await events.emit(tx, row.workspace_id, 'provider_connection.recovered', { providerConnectionId: row.id, source: 'verification' });
    }
  }

  return {
    get,

    async create(actor: Actor, workspaceId: string, dto: CreateConnectionInput): Promise<ProviderConnectionRow> {
      assertMetadataSize(dto.metadata);
      // Visibility before the URL check: another tenant's workspace answers 404 whatever the body.
      await workspaces.get(actor, workspaceId);
      const baseUrl = await checkedBaseUrl(dto.baseUrl);
      const id = newId();
      const secret = secretOf(dto.protocolProfile, dto.apiKey, dto);
      const sealed = sealProviderApiKey(secretBox, id, secret.text);
      const now = clock.now();
      return db.transaction(async (tx) => {
        await workspaces.requireWritable(actor, workspaceId, tx);
        const row = await repo.insert(
          {
            id,
            workspace_id: workspaceId,
            name: dto.name,
            protocol_profile: dto.protocolProfile,
            base_url: baseUrl,
            status: 'ACTIVE',
            api_key_ciphertext: sealed.ciphertext,
            api_key_key_id: sealed.keyId,
            secret_preview: secret.preview,
            upstream_timeout_ms: dto.upstreamTimeoutMs ?? null,
            retry: dto.retry ? retryOf(dto.retry) : null,
            enforces_output_cap: dto.enforcesOutputCap ?? true,
            metadata: dto.metadata ?? {},
            last_verified_at: null,
            created_at: now,
            updated_at: now,
            archived_at: null,
          },
          tx,
        );
        await audit.record(
          actor,
          {
            action: 'provider_connection.created',
            resourceType: RESOURCE,
            resourceId: id,
            workspaceId,
            changes: { ...redactedAws(dto), baseUrl, apiKey: REDACTED, secretPreview: row.secret_preview },
          },
          tx,
        );
        return row;
      });
    },

    async list(
      actor: Actor,
      workspaceId: string,
      page: PageRequest & { status?: ProviderConnectionStatus | undefined },
    ): Promise<Page<ProviderConnectionRow>> {
      await workspaces.get(actor, workspaceId);
      return repo.list({ ...page, workspaceId });
    },

    /** Probes the upstream with a key that is not saved; changes nothing. */
    async test(actor: Actor, workspaceId: string, dto: TestConnectionInput): Promise<ProviderCheckResult> {
      await workspaces.get(actor, workspaceId);
      const baseUrl = await checkedBaseUrl(dto.baseUrl);
      return probe(dto.protocolProfile, baseUrl, secretOf(dto.protocolProfile, dto.apiKey, dto).text);
    },

    async update(actor: Actor, id: string, dto: UpdateConnectionInput): Promise<ProviderConnectionRow> {
      assertMetadataSize(dto.metadata);
      const seen = await get(actor, id);
      const baseUrl = dto.baseUrl !== undefined ? await checkedBaseUrl(dto.baseUrl) : undefined;
      assertAwsWithKey(dto);
      const newKey = dto.apiKey !== undefined ? keyReplacement(seen, dto.apiKey, dto) : undefined;
      return db.transaction(async (tx) => {
        const current = await lockForChange(actor, id, tx);
        assertKeyFollowsOrigin(current, baseUrl, dto.apiKey);
        const patch: Partial<ProviderConnectionRow> = { updated_at: clock.now() };
        if (dto.name !== undefined) patch.name = dto.name;
        if (dto.status !== undefined) patch.status = dto.status;
        if (dto.metadata !== undefined) patch.metadata = dto.metadata;
        if (dto.upstreamTimeoutMs !== undefined) patch.upstream_timeout_ms = dto.upstreamTimeoutMs;
        if (dto.retry !== undefined) patch.retry = dto.retry && retryOf(dto.retry, current.retry);
        if (dto.enforcesOutputCap !== undefined) patch.enforces_output_cap = dto.enforcesOutputCap;
        if (baseUrl !== undefined && baseUrl !== current.base_url) {
          patch.base_url = baseUrl;
          // The verification was of the old upstream.
          patch.last_verified_at = null;
        }
        if (newKey) Object.assign(patch, newKey);
        const row = await repo.update(id, patch, tx);
        await changes.announce({ kind: 'connection', id }, tx);
        await audit.record(
          actor,
          {
            action: 'provider_connection.updated',
            resourceType: RESOURCE,
            resourceId: id,
            workspaceId: row.workspace_id,
            changes: {
              ...redactedAws(dto),
              ...(baseUrl !== undefined ? { baseUrl } : {}),
              ...(newKey ? keyReplaced(newKey, current) : {}),
            },
          },
          tx,
        );
        return row;
      });
    },

    /** ARCHIVED: gone from the gateway, readable here. Idempotent. */
    async archive(actor: Actor, id: string): Promise<void> {
      await db.transaction(async (tx) => {
        const seen = await get(actor, id, tx);
        if (seen.status === 'ARCHIVED') return;
        await workspaces.requireWritable(actor, seen.workspace_id, tx);
        const current = await repo.findByIdForUpdate(id, tx);
        if (!current || current.status === 'ARCHIVED') return;
        const now = clock.now();
        await repo.update(id, { status: 'ARCHIVED', archived_at: now, updated_at: now }, tx);
        await changes.announce({ kind: 'connection', id }, tx);
        await audit.record(
          actor,
          {
            action: 'provider_connection.archived',
            resourceType: RESOURCE,
            resourceId: id,
            workspaceId: current.workspace_id,
            changes: { status: 'ARCHIVED', previousStatus: current.status },
          },
          tx,
        );
      });
    },

    /**
     * Probes with the stored key (outside any transaction), then records the
     * outcome; success sets lastVerifiedAt, unless the key or baseUrl changed
     * while the probe ran (the result would be about the old ones).
     */
    async verify(actor: Actor, id: string): Promise<ProviderCheckResult> {
      const row = await get(actor, id);
      // Refused before the probe, as lockForChange would refuse after it.
      await workspaces.requireWritableBeforeCall(actor, row.workspace_id);
      if (row.status === 'ARCHIVED') throw archived(row);
      const result = await probe(row.protocol_profile, row.base_url, openProviderApiKey(secretBox, row));
      await db.transaction(async (tx) => {
        const current = await lockForChange(actor, id, tx);
        const unchanged = current.api_key_ciphertext === row.api_key_ciphertext && current.base_url === row.base_url;
        const verified = result.outcome === 'reachable' && unchanged;
        if (verified) await repo.update(id, { last_verified_at: result.checkedAt }, tx);
        if (unchanged) await announceHealth(current, result, tx);
        await audit.record(
          actor,
          {
            action: 'provider_connection.verified',
            resourceType: RESOURCE,
            resourceId: id,
            workspaceId: current.workspace_id,
            changes: {
              outcome: result.outcome,
              ...(result.httpStatus !== undefined ? { httpStatus: result.httpStatus } : {}),
              ...(verified ? { lastVerifiedAt: result.checkedAt.toISOString() } : {}),
            },
          },
          tx,
        );
      });
      return result;
    },

    /** The new key replaces the old one in one UPDATE: the next upstream call uses it. */
    async rotateSecret(actor: Actor, id: string, input: RotateSecretInput): Promise<ProviderConnectionRow> {
      const newKey = keyReplacement(await get(actor, id), input.apiKey, input);
      return db.transaction(async (tx) => {
        const current = await lockForChange(actor, id, tx);
        const row = await repo.update(id, { ...newKey, updated_at: clock.now() }, tx);
        await changes.announce({ kind: 'connection', id }, tx);
        await audit.record(
          actor,
          {
            action: 'provider_connection.secret_rotated',
            resourceType: RESOURCE,
            resourceId: id,
            workspaceId: current.workspace_id,
            changes: keyReplaced(newKey, current),
          },
          tx,
        );
        return row;
      });
    },
  };
}
