/**
 * Inference keys: `nx-<environment>-` + 43 base64url characters (256 bits),
 * returned once, stored as a keyed hash. `prefix` (the first 12 characters of
 * the random part after the environment prefix) lets a person recognise a key.
 * Revoking touches neither plan nor quota.
 */
import type { Events } from '../events/outbox.js';
import type { Db, Queryable } from '../../db/database.js';
import { AppError } from '../../errors.js';
import { newId } from '../../ids.js';
import { assertVisible, type Actor, type Clock } from '../actor.js';
import type { AuditService } from '../audit/audit-service.js';
import { bindDeps } from '../bind.js';
import type { ChangeFeed } from '../changes/change-feed.js';
import type { Page, PageRequest } from '../pagination.js';
import { generateToken, type KeyHasher } from '../security/key-hash.js';
import type { InferenceKeyRepo, InferenceKeyRow } from './inference-key-repo.js';

const DAY_MS = 86_400_000;
const PREFIX_RANDOM_CHARS = 6;

export interface IssueKeyInput {
  name?: string | undefined;
  expiresAt?: Date | undefined;
}

export interface IssuedKey {
  row: InferenceKeyRow;
  /** The plaintext: shown once, never stored. */
  apiKey: string;
}

export function isKeyEnabled(row: InferenceKeyRow, now: Date): boolean {
  return row.revoked_at === null && row.expires_at > now;
}

interface InferenceKeyDeps {
  db: Db;
  inferenceKeyRepo: InferenceKeyRepo;
  hasher: KeyHasher;
  audit: AuditService;
  clock: Clock;
  keyEnvironment: string;
  ttlDays: number;
  changes: ChangeFeed;
  events: Events;
  /** How long before its expiry a key raises inference_key.expiring. */
  expiringDays: number;
}

/** A key by its id alone, if the actor may see its workspace (else not found, as an unknown one). */
async function get({ inferenceKeyRepo }: InferenceKeyDeps, actor: Actor, keyId: string): Promise<InferenceKeyRow> {
  const key = await inferenceKeyRepo.findById(keyId);
  if (!key) throw new AppError('inference_key_not_found', 'Inference key not found');
  assertVisible(actor, key.workspace_id, 'inference_key_not_found', 'Inference key');
  return key;
}

/** Issues a key for an access, in the caller's transaction (the caller checked the access). */
async function issueInTx(
  { inferenceKeyRepo, hasher, audit, clock, keyEnvironment, ttlDays }: InferenceKeyDeps,
  actor: Actor,
  access: { id: string; workspace_id: string },
  input: IssueKeyInput,
  tx: Queryable,
): Promise<IssuedKey> {
  const tokenPrefix = `nx-${keyEnvironment}-`;
  const now = clock.now();
  const expiresAt = input.expiresAt ?? new Date(now.getTime() + ttlDays * DAY_MS);
  if (expiresAt <= now) throw new AppError('invalid_parameter', 'expiresAt must be in the future', { param: 'expiresAt' });
  const apiKey = generateToken(tokenPrefix);
  const row = await inferenceKeyRepo.insert(
    {
      id: newId(),
      workspace_id: access.workspace_id,
      workspace_access_id: access.id,
      name: input.name ?? 'default',
      prefix: apiKey.slice(0, tokenPrefix.length + PREFIX_RANDOM_CHARS),
      key_hash: hasher.hash(apiKey),
      expires_at: expiresAt,
      revoked_at: null,
      last_request_at: null,
      created_at: now,
    },
    tx,
  );
  await audit.record(
    actor,
    {
      action: 'inference_key.issued',
      resourceType: 'inference_key',
      resourceId: row.id,
      workspaceId: access.workspace_id,
      changes: { workspaceAccessId: access.id, name: row.name, prefix: row.prefix, expiresAt: expiresAt.toISOString() },
    },
    tx,
  );
  return { row, apiKey };
}

function list({ inferenceKeyRepo }: InferenceKeyDeps, accessId: string, page: PageRequest): Promise<Page<InferenceKeyRow>> {
  return inferenceKeyRepo.list({ ...page, accessId });
}

/** Idempotent: revoking a revoked key changes nothing. */
async function revokeInTx(
  { inferenceKeyRepo, audit, clock, changes, events }: InferenceKeyDeps,
  actor: Actor,
  access: { id: string; workspace_id: string },
  keyId: string,
  tx: Queryable,
): Promise<void> {
  const key = await inferenceKeyRepo.find(access.id, keyId, tx);
  if (!key) throw new AppError('inference_key_not_found', 'Inference key not found');
  if (key.revoked_at) return;
  await inferenceKeyRepo.revoke(keyId, clock.now(), tx);
  await changes.announce({ kind: 'key', id: keyId }, tx);
  await audit.record(
    actor,
    {
      action: 'inference_key.revoked',
      resourceType: 'inference_key',
      resourceId: keyId,
      workspaceId: access.workspace_id,
      changes: { workspaceAccessId: access.id, prefix: key.prefix },
    },
    tx,
  );
  await events.emit(tx, access.workspace_id, 'inference_key.revoked', { inferenceKeyId: keyId, workspaceAccessId: access.id });
}

/** inference_key.expiring for every key entering its last days (NEXUS_EVENTS_KEY_EXPIRING_DAYS), once per key; how many. */
async function announceExpiring({ db, inferenceKeyRepo, clock, events, expiringDays }: InferenceKeyDeps): Promise<number> {
  const now = clock.now();
  const until = new Date(now.getTime() + expiringDays * 86_400_000);
  return db.transaction(async (tx) => {
    const keys = await inferenceKeyRepo.markExpiring(now, until, tx);
    for (const key of keys) {
      await events.emit(tx, key.workspace_id, 'inference_key.expiring', {
        inferenceKeyId: key.id,
        workspaceAccessId: key.workspace_access_id,
        expiresAt: key.expires_at.toISOString(),
      });
    }
    return keys.length;
  });
}

/** For the gateway: records lastRequestAt at most once a minute per key. */
function touchLastRequest({ inferenceKeyRepo, clock }: InferenceKeyDeps, keyId: string, at: Date = clock.now()): Promise<boolean> {
  return inferenceKeyRepo.touchLastRequest(keyId, at);
}

export const createInferenceKeyService = (deps: InferenceKeyDeps) =>
  bindDeps(deps, { get, issueInTx, list, revokeInTx, announceExpiring, touchLastRequest });

export type InferenceKeyService = ReturnType<typeof createInferenceKeyService>;
