/**
 * An endpoint's signing secrets: sealed at rest, shown once (at creation and at each rotation), and
 * those rotated out still signing beside the current one for the overlap.
 */
import { AppError } from '../../errors.js';
import type { Actor } from '../actor.js';
import { REDACTED } from '../audit/audit-service.js';
import { lockForChange, RESOURCE, type WebhookDeps } from './webhook-lookup.js';
import type { RotatedSecret, WebhookEndpointRow } from './webhook-repo.js';
import { newWebhookSecret } from './webhook-signature.js';

/**
 * The most secrets that sign a delivery at once: the current one and those rotated out whose overlap still runs. A
 * rotation that would make more is refused (409): each is a signature in every delivery's header.
 */
const MAX_SIGNING_SECRETS = 10;

/** The associated data binding a sealed secret to its endpoint (and to its slot: current, or one rotated out). */
const secretAad = (endpointId: string, slot: 'current' | 'previous') => `webhook_endpoint:${endpointId}:${slot}`;

/** The columns of a new current secret, sealed. */
export function sealed({ secretBox }: Pick<WebhookDeps, 'secretBox'>, endpointId: string, secret: string) {
  const s = secretBox.seal(secret, secretAad(endpointId, 'current'));
  return { secret_ciphertext: s.ciphertext, secret_key_id: s.keyId };
}

/**
 * A new secret, shown once. The one it replaces still signs beside it for the overlap, as do those rotated out
 * before whose overlap still runs: a second rotation within a day ends no secret early. More than
 * MAX_SIGNING_SECRETS at once is refused.
 */
export async function rotateSecret(deps: WebhookDeps, actor: Actor, id: string): Promise<{ endpoint: WebhookEndpointRow; secret: string }> {
  const { db, webhookRepo: repo, audit, secretBox, config, clock } = deps;
  const secret = newWebhookSecret();
  return db.transaction(async (tx) => {
    const current = await lockForChange(deps, actor, id, tx);
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
      { ...sealed(deps, id, secret), previous_secrets: [rotatedOut, ...stillSigning], updated_at: now },
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
}

/** The secrets that sign a delivery now: the current one, then those rotated out whose overlap runs, newest first. */
export function signingSecrets(
  { secretBox }: WebhookDeps,
  row: Pick<WebhookEndpointRow, 'id' | 'secret_ciphertext' | 'secret_key_id' | 'previous_secrets'>,
  now: Date,
): string[] {
  const secrets = [secretBox.open({ keyId: row.secret_key_id, ciphertext: row.secret_ciphertext }, secretAad(row.id, 'current'))];
  for (const previous of row.previous_secrets) {
    if (Date.parse(previous.expiresAt) <= now.getTime()) continue;
    secrets.push(secretBox.open({ keyId: previous.keyId, ciphertext: previous.ciphertext }, secretAad(row.id, 'previous')));
  }
  return secrets;
}
