/**
 * A billing connection's write-only secrets: the provider credential (sealed, previewed, verified
 * against the provider) and the webhook secret (rotated with an overlap).
 */
import { AppError } from '../../errors.js';
import type { Actor } from '../actor.js';
import { secretPreview } from '../security/secret-box.js';
import type { BillingConnectionRow } from './billing-repo.js';
import { credentialAad, credentialModeMismatch, webhookSecretAad } from './billing-secrets.js';
import { ProviderError } from './billing-types.js';
import { requireActive, visibleConnection, writableConnection, type ConnectionDeps } from './connection-lookup.js';

export function sealCredential(
  { secretBox }: Pick<ConnectionDeps, 'secretBox'>,
  row: Pick<BillingConnectionRow, 'id' | 'provider' | 'mode'>,
  credential: string,
): Partial<BillingConnectionRow> {
  if (credentialModeMismatch(row.provider, row.mode, credential)) {
    throw new AppError('invalid_parameter', `The credential belongs to the other mode than the connection's ${row.mode}`, {
      param: 'credential',
    });
  }
  const sealed = secretBox.seal(credential, credentialAad(row.id));
  return {
    credential_ciphertext: sealed.ciphertext,
    credential_key_id: sealed.keyId,
    credential_preview: secretPreview(credential),
    credential_verification_status: 'UNVERIFIED',
    last_verification_error: null,
    external_account_id: null,
  };
}

export function sealWebhookSecret(
  { secretBox }: Pick<ConnectionDeps, 'secretBox'>,
  id: string,
  secret: string,
): Partial<BillingConnectionRow> {
  const sealed = secretBox.seal(secret, webhookSecretAad(id));
  return { webhook_secret_ciphertext: sealed.ciphertext, webhook_secret_key_id: sealed.keyId };
}

export async function configureCredential(
  deps: ConnectionDeps,
  actor: Actor,
  id: string,
  credential: string,
): Promise<BillingConnectionRow> {
  const { db, repo, audit, clock } = deps;
  return db.transaction(async (tx) => {
    const row = await writableConnection(deps, actor, id, tx);
    requireActive(row);
    const updated = await repo.updateConnection(id, { ...sealCredential(deps, row, credential), updated_at: clock.now() }, tx);
    await audit.record(
      actor,
      {
        action: row.credential_ciphertext ? 'billing_connection.credential_rotated' : 'billing_connection.credential_configured',
        resourceType: 'billing_connection',
        resourceId: id,
        workspaceId: row.workspace_id,
        changes: { credential: credential, credentialPreview: updated.credential_preview },
      },
      tx,
    );
    return updated;
  });
}

/** Stores or rotates the webhook secret; the previous one verifies for the overlap window. */
export async function configureWebhookSecret(
  deps: ConnectionDeps,
  actor: Actor,
  id: string,
  secret: string,
): Promise<BillingConnectionRow> {
  const { db, repo, audit, clock } = deps;
  return db.transaction(async (tx) => {
    const row = await writableConnection(deps, actor, id, tx);
    requireActive(row);
    const now = clock.now();
    const rotation: Partial<BillingConnectionRow> = row.webhook_secret_ciphertext
      ? {
          previous_webhook_secret_ciphertext: row.webhook_secret_ciphertext,
          previous_webhook_secret_key_id: row.webhook_secret_key_id,
          previous_webhook_secret_expires_at: new Date(now.getTime() + deps.webhookSecretOverlapMs),
        }
      : {};
    const updated = await repo.updateConnection(id, { ...sealWebhookSecret(deps, id, secret), ...rotation, updated_at: now }, tx);
    await audit.record(
      actor,
      {
        action: row.webhook_secret_ciphertext
          ? 'billing_connection.webhook_secret_rotated'
          : 'billing_connection.webhook_secret_configured',
        resourceType: 'billing_connection',
        resourceId: id,
        workspaceId: row.workspace_id,
        changes: {
          webhookSecret: secret,
          ...(rotation.previous_webhook_secret_expires_at
            ? { previousSecretValidUntil: rotation.previous_webhook_secret_expires_at.toISOString() }
            : {}),
        },
      },
      tx,
    );
    return updated;
  });
}

/** What asking the provider with the credential found (VERIFIED or FAILED). */
async function verificationOutcome(deps: ConnectionDeps, row: BillingConnectionRow): Promise<Partial<BillingConnectionRow>> {
  const client = deps.clientFor(row);
  if (!client) throw new AppError('billing_not_configured', 'The connection has no provider credential', { param: 'credential' });
  try {
    const { externalAccountId } = await client.verify();
    return { credential_verification_status: 'VERIFIED', last_verification_error: null, external_account_id: externalAccountId };
  } catch (err) {
    if (!(err instanceof ProviderError)) throw err;
    return {
      credential_verification_status: 'FAILED',
      last_verification_error:
        err.kind === 'auth' ? 'credential_rejected' : err.kind === 'unavailable' ? 'provider_unreachable' : 'provider_refused',
    };
  }
}

/** Calls the provider with the credential and records the outcome (VERIFIED or FAILED). */
export async function verify(deps: ConnectionDeps, actor: Actor, id: string): Promise<BillingConnectionRow> {
  const { db, repo, workspaces, audit, clock } = deps;
  const row = await visibleConnection(deps, actor, id);
  await workspaces.requireWritableBeforeCall(actor, row.workspace_id);
  requireActive(row);
  const outcome = await verificationOutcome(deps, row);
  return db.transaction(async (tx) => {
    const current = await writableConnection(deps, actor, id, tx);
    // A credential rotated while we were asking the provider: this outcome is about the old one.
    if (current.credential_ciphertext !== row.credential_ciphertext) return current;
    const now = clock.now();
    const updated = await repo.updateConnection(id, { ...outcome, last_verified_at: now, updated_at: now }, tx);
    await audit.record(
      actor,
      {
        action: 'billing_connection.verified',
        resourceType: 'billing_connection',
        resourceId: id,
        workspaceId: row.workspace_id,
        changes: { credentialVerificationStatus: outcome.credential_verification_status, error: outcome.last_verification_error },
      },
      tx,
    );
    return updated;
  });
}
