/**
 * Provider keys never leave encrypted storage except on the way to the upstream:
 * after driving every provider-connection operation (happy and error paths) with
 * marked keys, no response body and no log line of this process holds one, nor
 * any record the run has written so far. The global teardown repeats the scan
 * over the whole run.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  archiveProviderConnection,
  createProviderConnection,
  createWorkspace,
  getProviderConnection,
  listAuditLogs,
  listProviderConnections,
  rotateProviderSecret,
  testProviderConnection,
  updateProviderConnection,
  verifyProviderConnection,
} from '../support/sdk.js';
import { runDir } from '../support/paths.js';
import { startTestApp, TEST_ROOT_KEY, type TestApp } from '../support/test-app.js';
import { refusedUrl, startFakeUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { findSecretLeaks, recordFiles, SECRET_MARKER } from './secret-marker.js';

let t: TestApp;
let openaiUp: FakeUpstream;
let anthropicUp: FakeUpstream;
const keys = { openai: testProviderKey('scan-openai'), anthropic: testProviderKey('scan-anthropic'), rotated: testProviderKey('scan-rotated') };

beforeAll(async () => {
  t = await startTestApp();
  openaiUp = await startFakeUpstream('openai', [keys.openai, keys.rotated]);
  anthropicUp = await startFakeUpstream('anthropic', [keys.anthropic]);
});
afterAll(async () => {
  await openaiUp?.close();
  await anthropicUp?.close();
  await t?.close();
});

async function rawPost(path: string, body: unknown) {
  const res = await t.fetch(`${t.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TEST_ROOT_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return res.status;
}

describe('the secret scan', () => {
  it('drives every provider-connection operation with marked keys', async () => {
    const ws = (await createWorkspace({ client: t.client, body: { name: 'scan' } })).data!;
    const workspaceId = ws.id;
    for (const [profile, up, apiKey] of [
      ['openai', openaiUp, keys.openai],
      ['anthropic', anthropicUp, keys.anthropic],
    ] as const) {
      const tested = await testProviderConnection({ client: t.client, path: { workspaceId }, body: { protocolProfile: profile, baseUrl: up.url, apiKey } });
      expect(tested.data!.accepted).toBe(true);
      const conn = await createProviderConnection({
        client: t.client,
        path: { workspaceId },
        body: { name: profile, protocolProfile: profile, baseUrl: up.url, apiKey },
        headers: { 'Idempotency-Key': `scan-${profile}` },
      });
      expect(conn.response.status).toBe(201);
      // The replay path stores and returns a recorded answer.
      const replay = await createProviderConnection({
        client: t.client,
        path: { workspaceId },
        body: { name: profile, protocolProfile: profile, baseUrl: up.url, apiKey },
        headers: { 'Idempotency-Key': `scan-${profile}` },
      });
      expect(replay.response.headers.get('idempotent-replayed')).toBe('true');
      const id = conn.data!.id;
      expect((await verifyProviderConnection({ client: t.client, path: { providerConnectionId: id } })).data!.accepted).toBe(true);
      await getProviderConnection({ client: t.client, path: { providerConnectionId: id } });
      await updateProviderConnection({ client: t.client, path: { providerConnectionId: id }, body: { name: `${profile}-2` } });
    }
    const list = await listProviderConnections({ client: t.client, path: { workspaceId } });
    const openaiId = list.data!.find((c) => c.protocolProfile === 'openai')!.id;
    const rotated = await rotateProviderSecret({ client: t.client, path: { providerConnectionId: openaiId }, body: { apiKey: keys.rotated } });
    expect(rotated.response.status).toBe(200);
    expect((await verifyProviderConnection({ client: t.client, path: { providerConnectionId: openaiId } })).data!.accepted).toBe(true);

    // Error paths with a key in the request: rejected keys, bad URLs, unreachable and refused bodies.
    const wrong = testProviderKey('scan-wrong');
    expect(
      (await testProviderConnection({ client: t.client, path: { workspaceId }, body: { protocolProfile: 'openai', baseUrl: openaiUp.url, apiKey: wrong } })).data!
        .outcome,
    ).toBe('credentials_rejected');
    expect(
      (
        await testProviderConnection({
          client: t.client,
          path: { workspaceId },
          body: { protocolProfile: 'openai', baseUrl: await refusedUrl(), apiKey: wrong },
        })
      ).data!.outcome,
    ).toBe('unreachable');
    const base = `/admin/v1/workspaces/${workspaceId}/provider-connections`;
    expect(await rawPost(base, { name: 'x', protocolProfile: 'openai', baseUrl: `http://${wrong}@127.0.0.1:1`, apiKey: wrong })).toBe(400);
    expect(await rawPost(base, { name: 'x', protocolProfile: 'openai', baseUrl: `http://127.0.0.1:1/#${wrong}`, apiKey: wrong })).toBe(400);
    expect(await rawPost(base, { name: 'x', protocolProfile: 'openai', baseUrl: openaiUp.url, apiKey: `${wrong} with space` })).toBe(400);
    expect(await rawPost(base, { name: 'x', protocolProfile: 'openai', baseUrl: openaiUp.url, apiKey: wrong, extra: wrong })).toBe(400);
    expect(await rawPost(`${base}/test`, { protocolProfile: 'nope', baseUrl: openaiUp.url, apiKey: wrong })).toBe(400);
    expect(await rawPost(`/admin/v1/provider-connections/${openaiId}/rotate-secret`, { apiKey: wrong, extra: wrong })).toBe(400);

    await archiveProviderConnection({ client: t.client, path: { providerConnectionId: openaiId } });
    await listAuditLogs({ client: t.client, path: { workspaceId } });

    // The keys did travel, to the upstreams only.
    const sent = [...openaiUp.requests, ...anthropicUp.requests].map((r) => JSON.stringify(r.headers));
    expect(sent.some((h) => h.includes(keys.openai))).toBe(true);
    expect(sent.some((h) => h.includes(keys.rotated))).toBe(true);
    expect(sent.some((h) => h.includes(keys.anthropic))).toBe(true);
  });

  it('finds no key in any response body or log line of this process', () => {
    const own = recordFiles(runDir, process.pid);
    expect(own.map((f) => f.replace(/.*\//, '')).sort()).toEqual([`logs-${process.pid}.log`, `responses-${process.pid}.log`]);
    expect(t.logs.length).toBeGreaterThan(10);
    expect(t.logs.join('\n')).not.toContain(SECRET_MARKER);
    expect(findSecretLeaks(own)).toEqual([]);
  });

  it('finds no key in any record the run has written so far', () => {
    expect(findSecretLeaks(recordFiles(runDir))).toEqual([]);
  });

  it('would notice a leak', () => {
    const dir = mkdtempSync(join(tmpdir(), 'nexus-scan-'));
    try {
      const leaky = join(dir, 'responses-1.log');
      writeFileSync(leaky, `clean\n{"body":"${testProviderKey('selftest')}"}\n`);
      expect(findSecretLeaks(recordFiles(dir))).toEqual([`${leaky}:2`]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
