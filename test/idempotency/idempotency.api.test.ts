import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createPlan, createProviderConnection, createWorkspace, issueInferenceKey, provisionWorkspaceUser } from '../support/sdk.js';
import { createHash } from 'node:crypto';
import { createIdempotencyRepo } from '../../src/domain/idempotency/idempotency-repo.js';
import { CLAIM_LOCK_TIMEOUT_MS, createIdempotencyService } from '../../src/domain/idempotency/idempotency-service.js';
import { createKeyHasher, IDEMPOTENCY_HASH_LABEL } from '../../src/domain/security/key-hash.js';
import { ENV_ROOT_KEY_ID } from '../../src/domain/management-keys/management-key-service.js';
import { activePlan } from '../support/tenant.js';
import { startTestApp, TEST_ROOT_KEY, type TestApp } from '../support/test-app.js';
import { testProviderKey } from '../support/fake-upstreams.js';

const START = new Date('2026-11-01T00:00:00.000Z');
let current = START;
const clock = { now: () => new Date(current.getTime()) };
const at = (ms: number) => new Date(START.getTime() + ms);
const WORKSPACES = '/admin/v1/workspaces';
const HOUR = 3_600_000;
const REPLAY_WINDOW_MS = 24 * HOUR;

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp({ clock });
});
afterAll(async () => {
  await t?.close();
});
beforeEach(() => {
  current = START;
});

const idempotency = () => t.nexus.services.idempotency;
const workspacesNamed = async (name: string) => (await t.database.db('workspaces').where({ name })).length;
const rowOf = (key: string) => t.database.db('idempotency_keys').where({ principal_id: ENV_ROOT_KEY_ID, idempotency_key: key }).first();

/** A workspace with an ACTIVE plan and one provisioned user's access. */
async function newAccess(name: string) {
  const ws = (await createWorkspace({ client: t.client, body: { name } })).data!;
  const { plan } = await activePlan(t.client, ws.id, { key: 'pro', strategyKey: 'q' });
  const user = await provisionWorkspaceUser({
    client: t.client,
    path: { workspaceId: ws.id },
    body: { externalUserId: 'u1', email: 'u1@example.com', planId: plan.id },
  });
  expect(user.response.status).toBe(201);
  return { workspaceId: ws.id, planId: plan.id, accessId: user.data!.access.id };
}

/** The claim of a request whose process died before it answered: a row without a response. */
async function claimLeftUnfinished(key: string, body: unknown) {
  const claim = await idempotency().claim(ENV_ROOT_KEY_ID, key, 'POST', WORKSPACES, idempotency().requestHash('POST', WORKSPACES, body));
  expect(claim.kind).toBe('claimed');
  return claim as { kind: 'claimed'; claimedAt: Date };
}

describe('a claim left unfinished by a request that died', () => {
  it('holds its key for the lock timeout, then a retry takes it over and runs the operation once', async () => {
    const key = 'crashed-create';
    await claimLeftUnfinished(key, { name: 'Survivor' });

    current = at(60_000);
    const early = await createWorkspace({ client: t.client, body: { name: 'Survivor' }, headers: { 'Idempotency-Key': key } });
    expect(early.response.status).toBe(409);
    expect((early.error as any).error).toMatchObject({ code: 'idempotency_key_in_use', param: 'Idempotency-Key' });
    expect(await workspacesNamed('Survivor')).toBe(0);

    current = at(CLAIM_LOCK_TIMEOUT_MS + 1000);
    const retry = await createWorkspace({ client: t.client, body: { name: 'Survivor' }, headers: { 'Idempotency-Key': key } });
    expect(retry.response.status).toBe(201);
    expect(retry.response.headers.get('idempotent-replayed')).toBeNull();
    expect(await workspacesNamed('Survivor')).toBe(1);
    expect(await rowOf(key)).toMatchObject({ response_status: 201, created_at: current });

    const again = await createWorkspace({ client: t.client, body: { name: 'Survivor' }, headers: { 'Idempotency-Key': key } });
    expect(again.response.status).toBe(201);
    expect(again.response.headers.get('idempotent-replayed')).toBe('true');
    expect(again.data!.id).toBe(retry.data!.id);
    expect(await workspacesNamed('Survivor')).toBe(1);
  });

  it('is still refused with another body once stale', async () => {
    const key = 'crashed-other-body';
    await claimLeftUnfinished(key, { name: 'First body' });
    current = at(CLAIM_LOCK_TIMEOUT_MS + 1000);
    const other = await createWorkspace({ client: t.client, body: { name: 'Second body' }, headers: { 'Idempotency-Key': key } });
    expect(other.response.status).toBe(409);
    expect((other.error as any).error.code).toBe('idempotency_key_reused');
    expect(await workspacesNamed('Second body')).toBe(0);
    expect(await rowOf(key)).toMatchObject({ response_status: null, created_at: START });
  });

  it('is taken over by one of two concurrent retries only', async () => {
    const key = 'crashed-concurrent';
    await claimLeftUnfinished(key, { name: 'Raced' });
    current = at(CLAIM_LOCK_TIMEOUT_MS + 1000);
    const retries = await Promise.all(
      [1, 2].map(() => createWorkspace({ client: t.client, body: { name: 'Raced' }, headers: { 'Idempotency-Key': key } })),
    );
    expect(await workspacesNamed('Raced')).toBe(1);
    const ran = retries.filter((r) => r.response.status === 201 && !r.response.headers.get('idempotent-replayed'));
    expect(ran).toHaveLength(1);
    const other = retries.find((r) => r !== ran[0])!;
    // The loser either found the claim taken (in use) or, if the winner had already answered, replays it.
    if (other.response.status === 409) expect((other.error as any).error.code).toBe('idempotency_key_in_use');
    else expect(other.data!.id).toBe(ran[0]!.data!.id);

    // The same race on the claim itself, without HTTP in between.
    const raced = 'crashed-claim-race';
    await claimLeftUnfinished(raced, { name: 'x' });
    current = at(2 * CLAIM_LOCK_TIMEOUT_MS + 2000);
    const hash = idempotency().requestHash('POST', WORKSPACES, { name: 'x' });
    const outcomes = await Promise.allSettled([1, 2, 3].map(() => idempotency().claim(ENV_ROOT_KEY_ID, raced, 'POST', WORKSPACES, hash)));
    expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1);
    for (const o of outcomes) if (o.status === 'rejected') expect(o.reason.code).toBe('idempotency_key_in_use');
  });

  it('a late answer of the request taken over neither overwrites nor frees the new claim', async () => {
    const key = 'crashed-late-answer';
    const dead = await claimLeftUnfinished(key, { name: 'late' });
    current = at(CLAIM_LOCK_TIMEOUT_MS + 1000);
    const hash = idempotency().requestHash('POST', WORKSPACES, { name: 'late' });
    const live = await idempotency().claim(ENV_ROOT_KEY_ID, key, 'POST', WORKSPACES, hash);
    expect(live.kind).toBe('claimed');

    await idempotency().release(ENV_ROOT_KEY_ID, key, dead.claimedAt);
    await idempotency().complete(ENV_ROOT_KEY_ID, key, dead.claimedAt, { status: 201, body: { from: 'dead' }, headers: {} });
    expect(await rowOf(key)).toMatchObject({ response_status: null, created_at: current });

    await idempotency().complete(ENV_ROOT_KEY_ID, key, (live as { claimedAt: Date }).claimedAt, {
      status: 201,
      body: { from: 'live' },
      headers: {},
    });
    const replay = await idempotency().claim(ENV_ROOT_KEY_ID, key, 'POST', WORKSPACES, hash);
    expect(replay).toMatchObject({ kind: 'replay', response: { status: 201, body: { from: 'live' } } });
  });
});

describe('rows past the 24 h replay window', () => {
  it('are purged with the key plaintext they hold; a fresh request with the key runs anew', async () => {
    const { accessId } = await newAccess('purge');
    const key = 'issue-once';
    const issue = () =>
      issueInferenceKey({ client: t.client, path: { accessId }, body: { name: 'laptop' }, headers: { 'Idempotency-Key': key } });
    const first = await issue();
    expect(first.response.status).toBe(201);

    // Within the window, a replay shows the plaintext once more (sealed at rest in the meantime).
    current = at(23 * HOUR);
    const replay = await issue();
    expect(replay.response.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.data).toEqual(first.data);
    await idempotency().purgeExpired();
    expect(await rowOf(key)).toBeDefined();

    current = at(REPLAY_WINDOW_MS + 1000);
    expect(await idempotency().purgeExpired()).toBeGreaterThanOrEqual(1);
    expect(await rowOf(key)).toBeUndefined();
    expect(await t.database.db('inference_keys').where({ workspace_access_id: accessId })).toHaveLength(1);

    const fresh = await issue();
    expect(fresh.response.status).toBe(201);
    expect(fresh.response.headers.get('idempotent-replayed')).toBeNull();
    expect(fresh.data!.id).not.toBe(first.data!.id);
    expect(fresh.data!.apiKey).not.toBe(first.data!.apiKey);
    expect(await t.database.db('inference_keys').where({ workspace_access_id: accessId })).toHaveLength(2);
  });

  it('go batch by batch, unfinished claims too, and rows inside the window stay', async () => {
    const expired = ['old-1', 'old-2', 'old-3', 'old-4', 'old-5'];
    for (const key of expired) await claimLeftUnfinished(key, { name: key });
    current = at(HOUR);
    const recent = await createWorkspace({ client: t.client, body: { name: 'recent' }, headers: { 'Idempotency-Key': 'recent' } });
    expect(recent.response.status).toBe(201);

    current = at(REPLAY_WINDOW_MS + 1000);
    const pastWindow = () => t.database.db('idempotency_keys').where('created_at', '<', at(1000));
    const due = (await pastWindow()).length;
    expect(due).toBeGreaterThanOrEqual(expired.length);
    expect(await idempotency().purgeExpired(2)).toBe(due);
    expect(await pastWindow()).toEqual([]);
    for (const key of expired) expect(await rowOf(key)).toBeUndefined();
    expect(await rowOf('recent')).toMatchObject({ response_status: 201 });
    const replay = await createWorkspace({ client: t.client, body: { name: 'recent' }, headers: { 'Idempotency-Key': 'recent' } });
    expect(replay.response.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.data!.id).toBe(recent.data!.id);
  });
});

describe('the request hash', () => {
  it('is keyed: a reader of the database cannot confirm a guessed secret of a body offline', async () => {
    const ws = (await createWorkspace({ client: t.client, body: { name: 'hashed' } })).data!;
    const apiKey = testProviderKey('hash');
    const body = { name: 'secretive', protocolProfile: 'openai' as const, baseUrl: 'http://127.0.0.1:9', apiKey };
    const key = 'keyed-hash';
    const created = await createProviderConnection({
      client: t.client,
      path: { workspaceId: ws.id },
      body,
      headers: { 'Idempotency-Key': key },
    });
    expect(created.response.status).toBe(201);
    const path = `/admin/v1/workspaces/${ws.id}/provider-connections`;
    const stored = (await rowOf(key)).request_hash as string;

    // The guess is right, yet no plain SHA-256 of the request matches what is stored.
    const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
    for (const text of [`POST ${path}\n${JSON.stringify(body)}`, JSON.stringify(body), apiKey]) expect(stored).not.toBe(sha256(text));
    // It depends on the server's key: the same request under another encryption key hashes otherwise.
    expect(stored).toBe(idempotency().requestHash('POST', path, body));
    const elsewhere = createIdempotencyService({
      idempotencyRepo: createIdempotencyRepo(t.database.db),
      clock,
      secretBox: t.nexus.services.secretBox,
      requestHasher: createKeyHasher(Buffer.alloc(32, 9), IDEMPOTENCY_HASH_LABEL),
    });
    expect(elsewhere.requestHash('POST', path, body)).not.toBe(stored);
    // Nor is it the keyed hash stored for inference and management keys (another label).
    expect(stored).not.toBe(t.nexus.services.hasher.hash(`POST ${path}\n${JSON.stringify(body)}`));

    const replay = await createProviderConnection({
      client: t.client,
      path: { workspaceId: ws.id },
      body,
      headers: { 'Idempotency-Key': key },
    });
    expect(replay.response.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.data!.id).toBe(created.data!.id);
  });
});

describe('what makes two requests the same', () => {
  /** A raw POST: the body is sent as written (key order, or no body at all). */
  async function post(path: string, key: string, body?: string) {
    const res = await t.fetch(`${t.url}${path}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${TEST_ROOT_KEY}`,
        'Idempotency-Key': key,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body,
    });
    return { status: res.status, body: await res.json(), replayed: res.headers.get('idempotent-replayed') };
  }

  it('the order of keys in the body, at any depth, does not matter; values do', async () => {
    const key = 'key-order';
    const first = await post(WORKSPACES, key, '{"name":"ord","metadata":{"a":1,"b":2,"nested":{"x":[1,2],"y":null}}}');
    expect(first.status).toBe(201);
    const reordered = await post(WORKSPACES, key, '{"metadata":{"nested":{"y":null,"x":[1,2]},"b":2,"a":1},"name":"ord"}');
    expect(reordered).toMatchObject({ status: 201, replayed: 'true' });
    expect(reordered.body).toEqual(first.body);
    expect(await workspacesNamed('ord')).toBe(1);

    for (const other of [
      '{"name":"ord","metadata":{"a":2,"b":1,"nested":{"x":[1,2],"y":null}}}',
      '{"name":"ord","metadata":{"a":1,"b":2,"nested":{"x":[2,1],"y":null}}}',
    ]) {
      const refused = await post(WORKSPACES, key, other);
      expect(refused.status).toBe(409);
      expect(refused.body.error.code).toBe('idempotency_key_reused');
    }
    expect(await workspacesNamed('ord')).toBe(1);
  });

  it('no body and an empty object are the same request (issueInferenceKey, publishPlan)', async () => {
    const { accessId, workspaceId } = await newAccess('no-body');
    const keysPath = `/admin/v1/workspace-accesses/${accessId}/api-keys`;
    const issued = await post(keysPath, 'issue-no-body');
    expect(issued.status).toBe(201);
    const empty = await post(keysPath, 'issue-no-body', '{}');
    expect(empty).toMatchObject({ status: 201, replayed: 'true' });
    expect(empty.body.id).toBe(issued.body.id);
    expect(await t.database.db('inference_keys').where({ workspace_access_id: accessId })).toHaveLength(1);
    // And the other way round.
    const issuedEmpty = await post(keysPath, 'issue-empty', '{}');
    expect(issuedEmpty.status).toBe(201);
    expect(await post(keysPath, 'issue-empty')).toMatchObject({ status: 201, replayed: 'true', body: { id: issuedEmpty.body.id } });
    expect(await t.database.db('inference_keys').where({ workspace_access_id: accessId })).toHaveLength(2);

    // A DRAFT plan with nothing bound: the 409 is the answer, stored and replayed to the same request.
    const draft = await createPlan({
      client: t.client,
      path: { workspaceId },
      body: { key: 'draft', name: 'Draft', billingInterval: 'MONTH' },
    });
    const publishPath = `/admin/v1/plans/${draft.data!.id}/publish`;
    const refused = await post(publishPath, 'publish-no-body');
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('plan_not_publishable');
    const again = await post(publishPath, 'publish-no-body', '{}');
    expect(again).toMatchObject({ status: 409, replayed: 'true', body: { error: { code: 'plan_not_publishable' } } });
    expect(await t.database.db('plans').where({ id: draft.data!.id }).first()).toMatchObject({ status: 'DRAFT' });
  });
});
