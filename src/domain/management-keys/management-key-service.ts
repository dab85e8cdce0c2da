/**
 * Management Keys (docs/decisions.md, "Management keys"): the root key from NEXUS_MANAGEMENT_KEY, or one
 * generated, stored hashed and printed once on first start; scoped keys created
 * with the CLI that see only their workspaces. Only hashes are stored.
 */
import type { Db, Queryable } from '../../db/database.js';
import { AppError } from '../../errors.js';
import { isUuid, newId } from '../../ids.js';
import { requireRoot, systemActor, type Actor, type Clock } from '../actor.js';
import type { AuditService } from '../audit/audit-service.js';
import { bindDeps } from '../bind.js';
import { constantTimeEqual, generateToken, type KeyHasher } from '../security/key-hash.js';
import type { WorkspaceRepo } from '../workspaces/workspace-repo.js';
import type { PageRequest } from '../pagination.js';
import type { ManagementKeyRepo, ScopedKeyRow } from './management-key-repo.js';

const MANAGEMENT_KEY_PREFIX = 'nx-mgmt-';
export const ENV_ROOT_KEY_ID = 'root';

export interface Principal {
  keyId: string;
  isRoot: boolean;
  workspaceIds: ReadonlySet<string> | null;
  /** A key's role (`owner`, or a workspace role in each of its workspaces); absent: none, its scope alone. */
  keyRole?: string | undefined;
}

/** The roles a key may carry: `owner` (a root key), or one role in each of its workspaces. */
type KeyRole = 'owner' | 'admin' | 'developer' | 'billing' | 'support' | 'viewer';

interface ManagementKeyDeps {
  db: Db;
  managementKeyRepo: ManagementKeyRepo;
  workspaceRepo: WorkspaceRepo;
  audit: AuditService;
  hasher: KeyHasher;
  clock: Clock;
  /** NEXUS_MANAGEMENT_KEY, when set. */
  rootKey: string | undefined;
}

/** The dependencies, and the root key's hash, made once. */
interface ManagementKeys extends ManagementKeyDeps {
  rootKeyHash: string | undefined;
}

/** The principal for a bearer token, or 401. */
async function authenticate({ managementKeyRepo, hasher, rootKeyHash }: ManagementKeys, token: string | undefined): Promise<Principal> {
  if (!token) throw new AppError('missing_credentials', 'Send a Management Key as Authorization: Bearer <key>');
  const hash = hasher.hash(token);
  if (rootKeyHash && constantTimeEqual(hash, rootKeyHash)) {
    return { keyId: ENV_ROOT_KEY_ID, isRoot: true, workspaceIds: null };
  }
  const row = await managementKeyRepo.findActiveByHash(hash);
  if (!row) throw new AppError('invalid_management_key', 'The Management Key is invalid or revoked');
  return {
    keyId: row.id,
    isRoot: row.is_root,
    workspaceIds: row.is_root ? null : new Set(row.workspace_ids),
    ...(row.role ? { keyRole: row.role } : {}),
  };
}

/** A new key stored (its hash, never the key), seeing `workspaceIds` (none: a root key); the plaintext, to show once. */
async function insertKey(
  { managementKeyRepo, hasher, clock }: ManagementKeys,
  id: string,
  key: { name: string; isRoot: boolean; role?: KeyRole | undefined },
  workspaceIds: string[],
  tx: Queryable,
): Promise<string> {
  const token = generateToken(MANAGEMENT_KEY_PREFIX);
  await managementKeyRepo.insert(
    {
      id,
      name: key.name,
      key_hash: hasher.hash(token),
      prefix: token.slice(0, 12),
      is_root: key.isRoot,
      role: key.role ?? null,
      created_at: clock.now(),
      revoked_at: null,
    },
    workspaceIds,
    tx,
  );
  return token;
}

/**
 * Without NEXUS_MANAGEMENT_KEY: creates a root key on the first start and
 * returns its plaintext (to print once); undefined on later starts.
 */
async function ensureRootKey(keys: ManagementKeys): Promise<string | undefined> {
  const { db, managementKeyRepo, audit, rootKeyHash } = keys;
  if (rootKeyHash) return undefined;
  return db.transaction(async (tx) => {
    await managementKeyRepo.lockAgainstInserts(tx);
    if (await managementKeyRepo.hasRoot(tx)) return undefined;
    const id = newId();
    const token = await insertKey(keys, id, { name: 'root', isRoot: true }, [], tx);
    await audit.record(
      systemActor('system'),
      {
        action: 'management_key.created',
        resourceType: 'management_key',
        resourceId: id,
        workspaceId: null,
        changes: { root: true },
      },
      tx,
    );
    return token;
  });
}

/** The workspaces a scoped key is to see, as given: at least one, each a UUID. */
function checkScope(workspaceIds: string[]): void {
  if (workspaceIds.length === 0)
    throw new AppError('invalid_parameter', 'A scoped key needs at least one workspace', { param: 'workspace' });
  const notUuid = workspaceIds.find((id) => !isUuid(id));
  if (notUuid !== undefined) throw new AppError('invalid_parameter', `workspace id '${notUuid}' is not a UUID`, { param: 'workspace' });
}

/** Each of them exists and is not archived, and stays so until the transaction ends (share-locked). */
async function lockScope({ workspaceRepo }: ManagementKeys, workspaceIds: string[], tx: Queryable): Promise<void> {
  for (const workspaceId of workspaceIds) {
    const workspace = await workspaceRepo.findByIdForShare(workspaceId, tx);
    if (!workspace) throw new AppError('workspace_not_found', `Workspace ${workspaceId} not found`, { param: 'workspace' });
    // Like every change under an archived workspace: it is read-only.
    if (workspace.status === 'ARCHIVED') {
      throw new AppError('workspace_archived', `Workspace ${workspaceId} is archived and read-only`, {
        current_status: workspace.status,
      });
    }
  }
}

/** A key that sees only the given workspaces; the plaintext is returned once. */
async function createScoped(
  keys: ManagementKeys,
  actor: Actor,
  input: { name: string; workspaceIds: string[]; role?: KeyRole | undefined },
): Promise<{ id: string; key: string }> {
  const { db, audit } = keys;
  checkScope(input.workspaceIds);
  return db.transaction(async (tx) => {
    await lockScope(keys, input.workspaceIds, tx);
    const id = newId();
    const key = { name: input.name, isRoot: false, role: input.role };
    const token = await insertKey(keys, id, key, [...new Set(input.workspaceIds)], tx);
    // One entry in each workspace's log, naming no other workspace: a key scoped to one
    // workspace reads its log and must not learn the ids of workspaces it cannot see.
    for (const workspaceId of new Set(input.workspaceIds)) {
      await audit.record(
        actor,
        {
          action: 'management_key.created',
          resourceType: 'management_key',
          resourceId: id,
          workspaceId,
          changes: { name: input.name, ...(input.role ? { role: input.role } : {}) },
        },
        tx,
      );
    }
    return { id, key: token };
  });
}

async function list({ managementKeyRepo }: ManagementKeys) {
  return managementKeyRepo.list();
}

/** A root key that sees every workspace; the plaintext is returned once. Its entry is in no workspace's log. */
async function createRoot(keys: ManagementKeys, actor: Actor, name: string, role?: 'owner'): Promise<{ id: string; key: string }> {
  const { db, audit } = keys;
  return db.transaction(async (tx) => {
    const id = newId();
    const token = await insertKey(keys, id, { name, isRoot: true, role }, [], tx);
    await audit.record(
      actor,
      {
        action: 'management_key.created',
        resourceType: 'management_key',
        resourceId: id,
        workspaceId: null,
        changes: { name, root: true, ...(role ? { role } : {}) },
      },
      tx,
    );
    return { id, key: token };
  });
}

/**
 * Through the Admin API, by a root key: a root key (`root`, or the role `owner`) or one scoped to `workspaceIds`,
 * with a workspace role or none; the key as stored, and its plaintext once.
 */
async function create(
  keys: ManagementKeys,
  actor: Actor,
  input: { name: string; root?: boolean | undefined; workspaceIds?: string[] | undefined; role?: KeyRole | undefined },
): Promise<{ row: ScopedKeyRow; key: string }> {
  requireRoot(actor);
  const workspaceIds = input.workspaceIds ?? [];
  const root = input.root === true || input.role === 'owner';
  if (root && workspaceIds.length > 0) {
    throw new AppError('invalid_parameter', 'A root key (role owner) sees every workspace: give no workspaceIds', {
      param: 'workspaceIds',
    });
  }
  if (input.root && input.role && input.role !== 'owner') {
    throw new AppError('invalid_parameter', `A root key's role is owner; a ${input.role} key is scoped to workspaceIds`, { param: 'role' });
  }
  if (!root && workspaceIds.length === 0) {
    throw new AppError('invalid_parameter', 'A scoped key needs at least one workspace (or root: true)', { param: 'workspaceIds' });
  }
  const made = root
    ? await createRoot(keys, actor, input.name, input.role === 'owner' ? 'owner' : undefined)
    : await createScoped(keys, actor, { name: input.name, workspaceIds, role: input.role });
  return { row: (await keys.managementKeyRepo.findById(made.id))!, key: made.key };
}

async function listPage({ managementKeyRepo }: ManagementKeys, actor: Actor, page: PageRequest) {
  requireRoot(actor);
  return managementKeyRepo.listPage(page);
}

/** The key by its id, for a root key; 404 when there is none. */
async function found({ managementKeyRepo }: ManagementKeys, id: string, tx?: Queryable): Promise<ScopedKeyRow> {
  const row = isUuid(id) ? await managementKeyRepo.findById(id, tx) : undefined;
  if (!row) throw new AppError('management_key_not_found', 'Management Key not found');
  return row;
}

/** The log entry of a change to a key, in each workspace it sees (a root key's in none), as its creation's was. */
async function recordChange(
  audit: AuditService,
  actor: Actor,
  row: ScopedKeyRow,
  change: { action: string; changes?: Record<string, unknown> },
  tx: Queryable,
): Promise<void> {
  for (const workspaceId of row.workspace_ids.length ? row.workspace_ids : [null]) {
    await audit.record(actor, { ...change, resourceType: 'management_key', resourceId: row.id, workspaceId }, tx);
  }
}

async function rename(keys: ManagementKeys, actor: Actor, id: string, name: string): Promise<ScopedKeyRow> {
  requireRoot(actor);
  return keys.db.transaction(async (tx) => {
    const row = await found(keys, id, tx);
    if (row.name === name) return row;
    await keys.managementKeyRepo.rename(row.id, name, tx);
    await recordChange(keys.audit, actor, row, { action: 'management_key.renamed', changes: { name } }, tx);
    return { ...row, name };
  });
}

/**
 * Revokes an active key (false: none with that id). The last active stored root key stays while no
 * NEXUS_MANAGEMENT_KEY is set: without it, no key could manage the others (409 last_root_key).
 */
async function revoke(keys: ManagementKeys, actor: Actor, id: string): Promise<boolean> {
  const { db, managementKeyRepo, audit, clock, rootKeyHash } = keys;
  if (!isUuid(id)) throw new AppError('invalid_parameter', `key id '${id}' is not a UUID`, { param: 'keyId' });
  return db.transaction(async (tx) => {
    const row = await managementKeyRepo.findById(id, tx);
    if (!row || row.revoked_at) return false;
    if (row.is_root && !rootKeyHash) {
      // Two revokes of the last two root keys at once: one waits for the other's count.
      await managementKeyRepo.lockAgainstInserts(tx);
      if ((await managementKeyRepo.countActiveRoots(tx)) <= 1) {
        throw new AppError('last_root_key', 'This is the last root Management Key: create another root key before revoking it');
      }
    }
    const revoked = await managementKeyRepo.revoke(id, clock.now(), tx);
    if (revoked) await recordChange(audit, actor, row, { action: 'management_key.revoked' }, tx);
    return revoked;
  });
}

/** Through the Admin API, by a root key: 404 for a key that never was; a revoked one stays revoked. */
async function revokeByRoot(keys: ManagementKeys, actor: Actor, id: string): Promise<void> {
  requireRoot(actor);
  await found(keys, id);
  await revoke(keys, actor, id);
}

export function createManagementKeyService(deps: ManagementKeyDeps) {
  const keys: ManagementKeys = { ...deps, rootKeyHash: deps.rootKey ? deps.hasher.hash(deps.rootKey) : undefined };
  return bindDeps(keys, { authenticate, ensureRootKey, createScoped, create, list, listPage, rename, revoke, revokeByRoot });
}

export type ManagementKeyService = ReturnType<typeof createManagementKeyService>;
