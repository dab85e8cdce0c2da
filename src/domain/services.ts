/**
 * Builds every service from its dependencies. The one place where areas meet;
 * each area adds its repositories and service here.
 */
import type { Config } from '../config.js';
import type { Db } from '../db/database.js';
import type { Logger } from '../observability/logger.js';
import type { Clock } from './actor.js';
import { createAuditRepo } from './audit/audit-repo.js';
import { createAuditService } from './audit/audit-service.js';
import { createIdempotencyService } from './idempotency/idempotency-service.js';
import { createManagementKeyRepo } from './management-keys/management-key-repo.js';
import { createManagementKeyService } from './management-keys/management-key-service.js';
import { createKeyHasher } from './security/key-hash.js';
import { createSecretBox } from './security/secret-box.js';
import { createWorkspaceRepo } from './workspaces/workspace-repo.js';
import { createWorkspaceService } from './workspaces/workspace-service.js';

export interface ServiceDeps {
  db: Db;
  config: Config;
  clock: Clock;
  logger: Logger;
  /** The outside world, replaceable in tests. */
  fetch: typeof fetch;
}

export function createServices(deps: ServiceDeps) {
  const { db, config, clock } = deps;
  const secretBox = createSecretBox(config.encryptionKey, config.previousEncryptionKeys);
  const hasher = createKeyHasher(config.encryptionKey);
  const auditRepo = createAuditRepo(db);
  const audit = createAuditService({ auditRepo, clock });
  const workspaceRepo = createWorkspaceRepo(db);
  const workspaces = createWorkspaceService({ db, workspaceRepo, audit, clock });
  const managementKeyRepo = createManagementKeyRepo(db);
  const managementKeys = createManagementKeyService({
    db,
    managementKeyRepo,
    workspaceRepo,
    audit,
    hasher,
    clock,
    rootKey: config.managementKey,
  });
  const idempotency = createIdempotencyService({ db, clock });

  return {
    ...deps,
    secretBox,
    hasher,
    audit,
    workspaces,
    managementKeys,
    idempotency,
  };
}

export type Services = ReturnType<typeof createServices>;
