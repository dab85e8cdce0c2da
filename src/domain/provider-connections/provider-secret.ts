/**
 * The provider API key at rest. Sealed with the row's id as associated data, so
 * a ciphertext copied to another row does not decrypt. The plaintext exists
 * only on the way to the upstream (probes here, the gateway's upstream call).
 */
import type { SealedSecret, SecretBox } from '../security/secret-box.js';

function providerSecretAad(connectionId: string): string {
  return `provider_connection:${connectionId}`;
}

export function sealProviderApiKey(secretBox: SecretBox, connectionId: string, apiKey: string): SealedSecret {
  return secretBox.seal(apiKey, providerSecretAad(connectionId));
}

export interface SealedProviderKeyRow {
  id: string;
  api_key_ciphertext: string;
  api_key_key_id: string;
}

/** Throws when the ciphertext was tampered with, moved to another row, or its key is not configured. */
export function openProviderApiKey(secretBox: SecretBox, row: SealedProviderKeyRow): string {
  return secretBox.open({ keyId: row.api_key_key_id, ciphertext: row.api_key_ciphertext }, providerSecretAad(row.id));
}
