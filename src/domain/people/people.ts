/** People's sign-in, sessions and memberships, composed from the configuration (src/domain/services.ts adds them to the services). */
import type { Config } from '../../config.js';
import type { Db } from '../../db/database.js';
import type { Logger } from '../../observability/logger.js';
import type { Clock } from '../actor.js';
import type { AuditService } from '../audit/audit-service.js';
import { createKeyHasher, type KeyHasher } from '../security/key-hash.js';
import type { WorkspaceRepo } from '../workspaces/workspace-repo.js';
import { createInvitationRepo } from './invitation-repo.js';
import { createInvitationService } from './invitation-service.js';
import { createMemberRepo } from './member-repo.js';
import { createMemberService } from './member-service.js';
import type { SecretBox } from '../security/secret-box.js';
import { createOidcSignIn } from './oidc-sign-in.js';
import { createPeopleSignIn } from './people-sign-in.js';
import { createSessionRepo } from './session-repo.js';
import { createSessionService } from './session-service.js';
import { createSignInRepo } from './sign-in-repo.js';

const CSRF_LABEL = 'nexus/session-csrf/v1';

export function createPeople(deps: {
  db: Db;
  config: Config;
  clock: Clock;
  logger: Logger;
  fetch: typeof fetch;
  hasher: KeyHasher;
  secretBox: SecretBox;
  audit: AuditService;
  workspaceRepo: WorkspaceRepo;
}) {
  const { db, config, clock, hasher, secretBox } = deps;
  const signInRepo = createSignInRepo(db);
  const sessions = createSessionService({
    db,
    sessionRepo: createSessionRepo(db),
    hasher,
    csrfHasher: createKeyHasher(config.encryptionKey, CSRF_LABEL),
    secretBox,
    audit: deps.audit,
    clock,
    idleMs: config.sessionIdleMs,
    maxMs: config.sessionMaxMs,
  });
  const memberRepo = createMemberRepo(db);
  const members = createMemberService({
    db,
    memberRepo,
    workspaceRepo: deps.workspaceRepo,
    audit: deps.audit,
    clock,
    ownerEmails: config.ownerEmails,
  });
  const invitations = createInvitationService({
    db,
    invitationRepo: createInvitationRepo(db),
    memberRepo,
    workspaceRepo: deps.workspaceRepo,
    audit: deps.audit,
    hasher,
    clock,
    invitationMs: config.invitationMs,
  });
  const oidc = createOidcSignIn({
    providers: config.oidcProviders,
    signInRepo,
    hasher,
    secretBox,
    clock,
    logger: deps.logger,
    fetch: deps.fetch,
  });
  const signIn = createPeopleSignIn({
    oidc,
    sessions,
    members,
    invitations,
    signInRepo,
    hasher,
    clock,
    ownerEmails: config.ownerEmails,
    loginLinkMs: config.loginLinkMs,
  });
  return { sessions, oidc, signIn, members, invitations };
}

export type People = ReturnType<typeof createPeople>;
