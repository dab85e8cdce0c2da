/**
 * The billing area, composed: connections and checkout, the webhook inbox and its
 * processor, projections, reconciliation and app-reported periods, plus the
 * periodic pass (pending events, time-driven access rules). createBilling returns
 * the service (what handlers and the app call) and the pass's steps apart, which
 * only tests run on demand.
 */
import type { Events } from '../events/outbox.js';
import type { Config } from '../../config.js';
import type { Db } from '../../db/database.js';
import type { Logger } from '../../observability/logger.js';
import type { Actor, Clock } from '../actor.js';
import type { AccessService } from '../accesses/access-service.js';
import type { AuditService } from '../audit/audit-service.js';
import { bindDeps } from '../bind.js';
import type { PageRequest } from '../pagination.js';
import type { SecretBox } from '../security/secret-box.js';
import type { WorkspaceService } from '../workspaces/workspace-service.js';
import { AppError } from '../../errors.js';
import { assertVisible } from '../actor.js';
import { createAccessPort } from './access-port.js';
import { createBillingRepo, type BillingConnectionRow, type BillingRepo } from './billing-repo.js';
import { openCredential } from './billing-secrets.js';
import type { BillingProviderClient } from './billing-types.js';
import { createConnectionService } from './connection-service.js';
import { createInbox } from './inbox.js';
import { createPaddleClient } from './paddle-client.js';
import { createPeriodSync } from './period-sync.js';
import { createProjector, type Projector } from './projection.js';
import { createReconciler } from './reconciliation.js';
import { createStripeClient } from './stripe-client.js';

/** How often the background pass runs (pending events, grace expiry, period ends). */
const BILLING_PASS_INTERVAL_MS = 30_000;

interface BillingDeps {
  db: Db;
  config: Config;
  clock: Clock;
  logger: Logger;
  fetch: typeof fetch;
  secretBox: SecretBox;
  audit: AuditService;
  workspaces: WorkspaceService;
  accesses: AccessService;
  events: Events;
}

/** What the area's own rules (the external subscriptions' list, the periodic pass) read and run. */
interface BillingParts {
  repo: BillingRepo;
  logger: Logger;
  projector: Projector;
  inbox: ReturnType<typeof createInbox>;
}

/** A client per call: the credential is opened for it and dropped after. */
function clientFor(deps: BillingDeps, conn: BillingConnectionRow): BillingProviderClient | null {
  const { secretBox, config, clock } = deps;
  const apiKey = openCredential(secretBox, conn);
  if (!apiKey) return null;
  if (conn.provider === 'STRIPE') {
    return createStripeClient({ apiKey, baseUrl: config.stripeApiBaseUrl, fetch: deps.fetch, now: () => clock.now() });
  }
  return createPaddleClient({ apiKey, baseUrl: config.paddleApiBaseUrl, mode: conn.mode, fetch: deps.fetch });
}

async function listExternalSubscriptions({ repo }: BillingParts, actor: Actor, accessId: string, page: PageRequest) {
  const access = await repo.findAccess(accessId);
  if (!access) throw new AppError('access_not_found', 'Workspace access not found');
  assertVisible(actor, access.workspace_id, 'access_not_found', 'Workspace access');
  return repo.listProjections({ ...page, accessId });
}

async function backgroundPass({ inbox, projector }: BillingParts): Promise<void> {
  await inbox.flushRejections();
  await inbox.processPending();
  await projector.tick();
}

/** Starts the periodic pass; returns the function that stops it. `observe` runs each pass (src/jobs.ts counts them). */
function startBackground(
  parts: BillingParts,
  intervalMs = BILLING_PASS_INTERVAL_MS,
  observe: (pass: () => Promise<void>) => Promise<void> = (pass) => pass(),
): () => Promise<void> {
  const { inbox, logger } = parts;
  let running: Promise<void> | null = null;
  const timer = setInterval(() => {
    if (running) return;
    running = observe(() => backgroundPass(parts))
      .catch((err) => {
        logger.error({ msg: 'billing background pass failed', cause: (err as Error)?.message });
      })
      .finally(() => {
        running = null;
      });
  }, intervalMs);
  timer.unref();
  return async () => {
    clearInterval(timer);
    await running;
    await inbox.drain();
    await inbox.flushRejections();
  };
}

export function createBilling(deps: BillingDeps) {
  const { db, config, clock, logger, secretBox, audit, workspaces } = deps;
  const repo = createBillingRepo(db);
  const clients = (conn: BillingConnectionRow) => clientFor(deps, conn);
  const accessPort = createAccessPort(deps.accesses);
  const projector = createProjector({ db, repo, accessPort, clock, logger, graceMs: config.billingPastDueGraceMs, events: deps.events });
  const inbox = createInbox({ db, repo, projector, secretBox, audit, workspaces, clock, logger, clientFor: clients });
  const parts: BillingParts = { repo, logger, projector, inbox };

  const service = {
    connections: createConnectionService({
      db,
      repo,
      workspaces,
      audit,
      secretBox,
      clock,
      clientFor: clients,
      webhookSecretOverlapMs: config.webhookSecretOverlapMs,
    }),
    /** The webhook inbox as the API sees it: receive, list, replay. */
    inbox: { receive: inbox.receive, list: inbox.list, replay: inbox.replay },
    reconciler: createReconciler({ db, repo, projector, workspaces, audit, clock, logger, clientFor: clients }),
    periodSync: createPeriodSync({ db, repo, projector, workspaces, audit, clock }),
    ...bindDeps(parts, { listExternalSubscriptions, startBackground }),
  };

  /** The periodic pass's steps, one at a time (tests run them with a fixed clock, deterministically). */
  const passes = {
    /** Processes what is pending or due for a retry; returns how many events. */
    processPending: () => inbox.processPending(),
    /** Applies the time-driven rules at `now` (default: the clock's); returns how many accesses changed. */
    tick: (now?: Date) => projector.tick(now),
    /** Writes the counts of refused deliveries. */
    flushRejections: () => inbox.flushRejections(),
  };

  return { service, passes };
}
