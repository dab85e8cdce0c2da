/**
 * Idempotency-Key (docs/decisions.md, "Idempotency"): the same key and body within 24 h replays the first
 * answer; the same key with another body or path is refused. The key is claimed
 * (a row without a response) before the operation runs, so two concurrent
 * retries cannot both execute it. A claim left unfinished for longer than any
 * request can take belongs to a request that died with its process: a retry
 * takes it over.
 */
import { AppError } from '../../errors.js';
import type { Clock } from '../actor.js';
import { bindDeps } from '../bind.js';
import type { KeyHasher } from '../security/key-hash.js';
import type { SecretBox } from '../security/secret-box.js';
import type { IdempotencyRepo, IdempotencyRow } from './idempotency-repo.js';

const TTL_MS = 24 * 3600 * 1000;

/**
 * How long an unfinished claim holds its key. Longer than any admin request can
 * take: the provider probe is bounded by NEXUS_PROVIDER_PROBE_TIMEOUT_MS (at most
 * 60 s, plus 5 s of DNS), a billing provider call by 15 s (a checkout makes up to
 * three). Past it, the request is taken for dead (crash, restart) and a retry may
 * run the operation again.
 */
export const CLAIM_LOCK_TIMEOUT_MS = 5 * 60 * 1000;

/** Rows deleted per statement by purgeExpired: short statements, short locks. */
const PURGE_BATCH_SIZE = 500;

interface StoredResponse {
  status: number;
  body: unknown;
  headers: Record<string, string>;
}

/** `claimedAt` identifies this claim: only its holder may complete or release it. */
type Claim = { kind: 'claimed'; claimedAt: Date } | { kind: 'replay'; response: StoredResponse };

/**
 * A body as JSON that does not depend on how it was written: object keys sorted
 * (at any depth), arrays in their order. No body is the empty object, so a
 * retry that sends `{}` where the first call sent nothing is the same request.
 */
function canonicalJson(body: unknown): string {
  return canonical(body ?? {});
}

function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const object = value as Record<string, unknown>;
    const members = Object.keys(object)
      .filter((name) => object[name] !== undefined)
      .sort()
      .map((name) => `${JSON.stringify(name)}:${canonical(object[name])}`);
    return `{${members.join(',')}}`;
  }
  return JSON.stringify(value);
}

/** What the idempotency rules read and write through. */
export interface IdempotencyDeps {
  idempotencyRepo: IdempotencyRepo;
  clock: Clock;
  secretBox: SecretBox;
  requestHasher: KeyHasher;
}

/**
 * Stored answers can hold secrets shown once (an inference key's plaintext), so
 * they are sealed like every other secret at rest, bound to their key.
 */
const aad = (principalId: string, key: string) => `idempotency:${principalId}:${key}`;

const inUse = () =>
  new AppError('idempotency_key_in_use', 'A request with this Idempotency-Key is still in progress', { param: 'Idempotency-Key' });

/**
 * What identifies a request under its key. Over the canonical body, so key order
 * and an absent body vs `{}` do not make a retry another request. Keyed (HMAC
 * with a server-side key): bodies hold secrets (provider and billing credentials),
 * and a plain hash would let a reader of the database confirm a guessed secret offline.
 */
function requestHash({ requestHasher }: IdempotencyDeps, method: string, path: string, body: unknown): string {
  return requestHasher.hash(`${method} ${path}\n${canonicalJson(body)}`);
}

/** The stored answer of a finished claim, opened. */
function replayOf({ secretBox }: IdempotencyDeps, principalId: string, key: string, row: IdempotencyRow): Claim {
  const stored = row.response_body as { keyId: string; ciphertext: string };
  const body = JSON.parse(secretBox.open(stored, aad(principalId, key))) as unknown;
  return { kind: 'replay', response: { status: row.response_status!, body: body ?? undefined, headers: row.response_headers ?? {} } };
}

async function claim(deps: IdempotencyDeps, principalId: string, key: string, method: string, path: string, hash: string): Promise<Claim> {
  const { idempotencyRepo: repo, clock } = deps;
  const k = { principalId, key };
  for (let attempt = 0; attempt < 3; attempt++) {
    const now = clock.now();
    if (await repo.insertClaim(k, { method, path, requestHash: hash, at: now })) return { kind: 'claimed', claimedAt: now };
    const row = await repo.find(k);
    if (!row) continue;
    const age = now.getTime() - new Date(row.created_at).getTime();
    if (age > TTL_MS) {
      await repo.deleteIfOlder(k, new Date(now.getTime() - TTL_MS));
      continue;
    }
    if (row.request_hash !== hash || row.method !== method || row.path !== path) {
      throw new AppError('idempotency_key_reused', 'This Idempotency-Key was used with another request', { param: 'Idempotency-Key' });
    }
    if (row.response_status === null) {
      if (age <= CLAIM_LOCK_TIMEOUT_MS) throw inUse();
      // A stale unfinished claim: its request died; this one takes it over.
      if (await repo.takeOver(k, new Date(now.getTime() - CLAIM_LOCK_TIMEOUT_MS), now)) return { kind: 'claimed', claimedAt: now };
      continue;
    }
    return replayOf(deps, principalId, key, row);
  }
  throw inUse();
}

/** Records the answer of the claim's operation; a no-op if the claim was taken over meanwhile. */
async function complete(
  { idempotencyRepo, secretBox }: IdempotencyDeps,
  principalId: string,
  key: string,
  claimedAt: Date,
  response: StoredResponse,
): Promise<void> {
  await idempotencyRepo.complete({ principalId, key }, claimedAt, {
    status: response.status,
    sealedBody: secretBox.seal(JSON.stringify(response.body ?? null), aad(principalId, key)),
    headers: response.headers,
  });
}

/** A failure that may succeed on retry (5xx) frees the key (unless another request took the claim over). */
async function release({ idempotencyRepo }: IdempotencyDeps, principalId: string, key: string, claimedAt: Date): Promise<void> {
  await idempotencyRepo.release({ principalId, key }, claimedAt);
}

/**
 * Deletes the rows past the replay window (they replay nothing any more, and a
 * stored answer can hold a key's plaintext), a batch per statement. Returns how many.
 */
async function purgeExpired({ idempotencyRepo, clock }: IdempotencyDeps, batchSize = PURGE_BATCH_SIZE): Promise<number> {
  const cutoff = new Date(clock.now().getTime() - TTL_MS);
  let purged = 0;
  for (;;) {
    const deleted = await idempotencyRepo.deleteOlderThan(cutoff, batchSize);
    purged += deleted;
    if (deleted < batchSize) return purged;
  }
}

export const createIdempotencyService = (deps: IdempotencyDeps) => bindDeps(deps, { requestHash, claim, complete, release, purgeExpired });

export type IdempotencyService = ReturnType<typeof createIdempotencyService>;
