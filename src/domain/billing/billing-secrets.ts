/**
 * Billing credentials and webhook secrets at rest: sealed with the secret box,
 * the associated data bound to the connection and the purpose, so a ciphertext
 * copied to another row or column fails to open.
 */
import type { SecretBox } from '../security/secret-box.js';
import type { BillingConnectionRow } from './billing-repo.js';

export const credentialAad = (connectionId: string) => `billing_connection:${connectionId}:credential`;
/** The current and the rotated-out webhook secret share a purpose: rotation moves the ciphertext. */
export const webhookSecretAad = (connectionId: string) => `billing_connection:${connectionId}:webhook_secret`;

export function openCredential(box: SecretBox, row: BillingConnectionRow): string | null {
  if (!row.credential_ciphertext || !row.credential_key_id) return null;
  return box.open({ keyId: row.credential_key_id, ciphertext: row.credential_ciphertext }, credentialAad(row.id));
}

/** The secrets that verify a signature now: the current one, then the previous one inside its overlap. */
export function openWebhookSecrets(box: SecretBox, row: BillingConnectionRow, now: Date): { secret: string; previous: boolean }[] {
  const secrets: { secret: string; previous: boolean }[] = [];
  if (row.webhook_secret_ciphertext && row.webhook_secret_key_id) {
    secrets.push({
      secret: box.open({ keyId: row.webhook_secret_key_id, ciphertext: row.webhook_secret_ciphertext }, webhookSecretAad(row.id)),
      previous: false,
    });
  }
  if (
    row.previous_webhook_secret_ciphertext &&
    row.previous_webhook_secret_key_id &&
    row.previous_webhook_secret_expires_at &&
    row.previous_webhook_secret_expires_at > now
  ) {
    secrets.push({
      secret: box.open(
        { keyId: row.previous_webhook_secret_key_id, ciphertext: row.previous_webhook_secret_ciphertext },
        webhookSecretAad(row.id),
      ),
      previous: true,
    });
  }
  return secrets;
}

/** A credential whose prefix names an environment must match the connection's mode. */
export function credentialModeMismatch(
  provider: BillingConnectionRow['provider'],
  mode: BillingConnectionRow['mode'],
  credential: string,
): boolean {
  const stripe = /^(?:sk|rk)_(test|live)_/.exec(credential);
  if (provider === 'STRIPE' && stripe) return (stripe[1] === 'test' ? 'TEST' : 'LIVE') !== mode;
  const paddle = /^pdl_(sdbx|live)_/.exec(credential);
  if (provider === 'PADDLE' && paddle) return (paddle[1] === 'sdbx' ? 'TEST' : 'LIVE') !== mode;
  return false;
}
