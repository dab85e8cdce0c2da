/**
 * A connection's key: sealed before it reaches a repository (a `bedrock` connection's whole credential: its
 * protocol's secret, src/protocols/bedrock-secret.ts), previewed, replaced in one UPDATE, and audited as its previews only.
 */
import type { Actor } from '../actor.js';
import { REDACTED } from '../audit/audit-service.js';
import { secretPreview } from '../security/secret-box.js';
import type { AwsFields } from '../../protocols/bedrock-secret.js';
import { connectionSecret, visibleSecret, type ProtocolProfile } from '../../protocols/index.js';
import { get, lockForChange, RESOURCE, type ProviderConnectionDeps } from './provider-connection-lookup.js';
import type { ProviderConnectionRow } from './provider-connection-repo.js';
import { openProviderApiKey, sealProviderApiKey } from './provider-secret.js';

/** The AWS fields of a new key (a `bedrock` connection's); apiKey is the rest of it. */
export type RotateSecretInput = { apiKey: string } & AwsFields;

/** A create or update as audited: the access key id and the session token are write-only as the key is. */
export function redactedAws<T extends AwsFields>(dto: T): T {
  const out = { ...dto };
  if (out.awsAccessKeyId !== undefined) out.awsAccessKeyId = REDACTED;
  if (out.awsSessionToken !== undefined) out.awsSessionToken = REDACTED;
  return out;
}

/**
 * The text a connection of `profile` seals (the key, or its protocol's secret: a `bedrock` connection's credential),
 * and its preview. `current`: the connection whose key it replaces (a bedrock one keeps its region).
 */
export function secretOf(
  { secretBox }: Pick<ProviderConnectionDeps, 'secretBox'>,
  profile: ProtocolProfile,
  apiKey: string,
  fields: AwsFields,
  current?: ProviderConnectionRow,
) {
  const text = connectionSecret(profile, apiKey, fields, current && (() => openProviderApiKey(secretBox, current)));
  return { text, preview: secretPreview(visibleSecret(profile, text)) };
}

/** The columns a new key replaces (rotation, or an update that brings one): sealed, previewed, unverified. */
export function keyReplacement(
  deps: Pick<ProviderConnectionDeps, 'secretBox'>,
  current: ProviderConnectionRow,
  apiKey: string,
  fields: AwsFields,
) {
  const secret = secretOf(deps, current.protocol_profile, apiKey, fields, current);
  const sealed = sealProviderApiKey(deps.secretBox, current.id, secret.text);
  return {
    api_key_ciphertext: sealed.ciphertext,
    api_key_key_id: sealed.keyId,
    secret_preview: secret.preview,
    last_verified_at: null,
    last_verify_outcome: null,
    last_verify_at: null,
  };
}

/** How a key replacement is audited: never the key, both previews. */
export function keyReplaced(newKey: ReturnType<typeof keyReplacement>, current: ProviderConnectionRow) {
  return { apiKey: REDACTED, secretPreview: newKey.secret_preview, previousSecretPreview: current.secret_preview };
}

/** The new key replaces the old one in one UPDATE: the next upstream call uses it. */
export async function rotateSecret(
  deps: ProviderConnectionDeps,
  actor: Actor,
  id: string,
  input: RotateSecretInput,
): Promise<ProviderConnectionRow> {
  const { db, providerConnectionRepo: repo, audit, clock, changes } = deps;
  const newKey = keyReplacement(deps, await get(deps, actor, id), input.apiKey, input);
  return db.transaction(async (tx) => {
    const current = await lockForChange(deps, actor, id, tx);
    const row = await repo.update(id, { ...newKey, updated_at: clock.now() }, tx);
    await changes.announce({ kind: 'connection', id }, tx);
    await audit.record(
      actor,
      {
        action: 'provider_connection.secret_rotated',
        resourceType: RESOURCE,
        resourceId: id,
        workspaceId: current.workspace_id,
        changes: keyReplaced(newKey, current),
      },
      tx,
    );
    return row;
  });
}
