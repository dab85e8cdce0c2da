/**
 * Provider connections: create, read, update, archive and test here; verify (provider-connection-health.ts)
 * and rotate (provider-connection-key.ts) beside, bound as one service.
 * The API key is sealed before it reaches a repository and opened only to call
 * the upstream. Every change writes its audit entry in the same transaction;
 * upstream probes run outside any transaction.
 */
import { AppError } from '../../errors.js';
import { newId } from '../../ids.js';
import type { Actor } from '../actor.js';
import { REDACTED } from '../audit/audit-service.js';
import { bindDeps } from '../bind.js';
import type { Page, PageRequest } from '../pagination.js';
import { DEFAULT_CONNECTION_RETRY, type ConnectionRetry } from './connection-retry.js';
import { assertMetadataSize } from '../workspaces/workspace-service.js';
import type { AwsFields } from '../../protocols/bedrock-secret.js';
import type { ProtocolProfile } from '../../protocols/index.js';
import { health, probe, verify } from './provider-connection-health.js';
import { keyReplaced, keyReplacement, redactedAws, rotateSecret, secretOf } from './provider-connection-key.js';
import { get, lockForChange, RESOURCE, type ProviderConnectionDeps } from './provider-connection-lookup.js';
import type { ProviderConnectionRow, ProviderConnectionStatus } from './provider-connection-repo.js';
import type { ProviderCheckResult } from './provider-probe.js';
import { sealProviderApiKey } from './provider-secret.js';
import { assertSafeUpstreamUrl } from '../security/upstream-guard.js';

interface CreateConnectionInput extends AwsFields {
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
type TestConnectionInput = Pick<CreateConnectionInput, 'protocolProfile' | 'baseUrl' | 'apiKey'> & AwsFields;

interface UpdateConnectionInput extends AwsFields {
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

/** A retry policy from the fields given, the others the current policy's (or the defaults). */
function retryOf(given: Partial<ConnectionRetry>, current?: ConnectionRetry | null): ConnectionRetry {
  const fields = Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined));
  return { ...DEFAULT_CONNECTION_RETRY, ...current, ...fields };
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

async function checkedBaseUrl({ config }: ProviderConnectionDeps, raw: string): Promise<string> {
  return normalizeBaseUrl(await assertSafeUpstreamUrl(raw, { allowPrivate: config.allowPrivateUpstreams }));
}

async function create(
  deps: ProviderConnectionDeps,
  actor: Actor,
  workspaceId: string,
  dto: CreateConnectionInput,
): Promise<ProviderConnectionRow> {
  const { db, providerConnectionRepo: repo, workspaces, audit, secretBox, clock } = deps;
  assertMetadataSize(dto.metadata);
  // Visibility before the URL check: another tenant's workspace answers 404 whatever the body.
  await workspaces.get(actor, workspaceId);
  const baseUrl = await checkedBaseUrl(deps, dto.baseUrl);
  const id = newId();
  const secret = secretOf(deps, dto.protocolProfile, dto.apiKey, dto);
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
}

async function list(
  { providerConnectionRepo, workspaces }: ProviderConnectionDeps,
  actor: Actor,
  workspaceId: string,
  page: PageRequest & { status?: ProviderConnectionStatus | undefined },
): Promise<Page<ProviderConnectionRow>> {
  await workspaces.get(actor, workspaceId);
  return providerConnectionRepo.list({ ...page, workspaceId });
}

/** Probes the upstream with a key that is not saved; changes nothing. */
async function test(
  deps: ProviderConnectionDeps,
  actor: Actor,
  workspaceId: string,
  dto: TestConnectionInput,
): Promise<ProviderCheckResult> {
  await deps.workspaces.get(actor, workspaceId);
  const baseUrl = await checkedBaseUrl(deps, dto.baseUrl);
  return probe(deps, dto.protocolProfile, baseUrl, secretOf(deps, dto.protocolProfile, dto.apiKey, dto).text);
}

/** The columns an update sets on `current` (baseUrl checked, the new key sealed, before the transaction). */
function patchOf(
  current: ProviderConnectionRow,
  dto: UpdateConnectionInput,
  baseUrl: string | undefined,
  newKey: ReturnType<typeof keyReplacement> | undefined,
  now: Date,
): Partial<ProviderConnectionRow> {
  const patch: Partial<ProviderConnectionRow> = { updated_at: now };
  if (dto.name !== undefined) patch.name = dto.name;
  if (dto.status !== undefined) patch.status = dto.status;
  if (dto.metadata !== undefined) patch.metadata = dto.metadata;
  if (dto.upstreamTimeoutMs !== undefined) patch.upstream_timeout_ms = dto.upstreamTimeoutMs;
  if (dto.retry !== undefined) patch.retry = dto.retry && retryOf(dto.retry, current.retry);
  if (dto.enforcesOutputCap !== undefined) patch.enforces_output_cap = dto.enforcesOutputCap;
  if (baseUrl !== undefined && baseUrl !== current.base_url) {
    patch.base_url = baseUrl;
    // The verification was of the old upstream.
    Object.assign(patch, { last_verified_at: null, last_verify_outcome: null, last_verify_at: null });
  }
  if (newKey) Object.assign(patch, newKey);
  return patch;
}

async function update(deps: ProviderConnectionDeps, actor: Actor, id: string, dto: UpdateConnectionInput): Promise<ProviderConnectionRow> {
  const { db, providerConnectionRepo: repo, audit, clock, changes } = deps;
  assertMetadataSize(dto.metadata);
  const seen = await get(deps, actor, id);
  const baseUrl = dto.baseUrl !== undefined ? await checkedBaseUrl(deps, dto.baseUrl) : undefined;
  assertAwsWithKey(dto);
  const newKey = dto.apiKey !== undefined ? keyReplacement(deps, seen, dto.apiKey, dto) : undefined;
  return db.transaction(async (tx) => {
    const current = await lockForChange(deps, actor, id, tx);
    assertKeyFollowsOrigin(current, baseUrl, dto.apiKey);
    const row = await repo.update(id, patchOf(current, dto, baseUrl, newKey, clock.now()), tx);
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
}

/** ARCHIVED: gone from the gateway, readable here. Idempotent. */
async function archive(deps: ProviderConnectionDeps, actor: Actor, id: string): Promise<void> {
  const { db, providerConnectionRepo: repo, workspaces, audit, clock, changes } = deps;
  await db.transaction(async (tx) => {
    const seen = await get(deps, actor, id, tx);
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
}

export const createProviderConnectionService = (deps: ProviderConnectionDeps) =>
  bindDeps(deps, { get, create, list, test, update, archive, verify, health, rotateSecret });
