/**
 * Provider keys never leave encrypted storage except on the way to the upstream:
 * after driving every provider-connection operation (happy and error paths) and
 * gateway calls (answered, failed upstream, refused) with marked keys, no response
 * body and no log line of this process holds one (each gateway call's line is
 * checked for its fields too), nor
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
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { createTenant, gatewayFetch } from '../gateway/gateway-support.js';

let t: TestApp;
let openaiUp: FakeUpstream;
let anthropicUp: FakeUpstream;
const keys = {
  openai: testProviderKey('scan-openai'),
  anthropic: testProviderKey('scan-anthropic'),
  rotated: testProviderKey('scan-rotated'),
};

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
      const tested = await testProviderConnection({
        client: t.client,
        path: { workspaceId },
        body: { protocolProfile: profile, baseUrl: up.url, apiKey },
      });
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
    const rotated = await rotateProviderSecret({
      client: t.client,
      path: { providerConnectionId: openaiId },
      body: { apiKey: keys.rotated },
    });
    expect(rotated.response.status).toBe(200);
    expect((await verifyProviderConnection({ client: t.client, path: { providerConnectionId: openaiId } })).data!.accepted).toBe(true);

    // Error paths with a key in the request: rejected keys, bad URLs, unreachable and refused bodies.
    const wrong = testProviderKey('scan-wrong');
    expect(
      (
        await testProviderConnection({
          client: t.client,
          path: { workspaceId },
          body: { protocolProfile: 'openai', baseUrl: openaiUp.url, apiKey: wrong },
        })
      ).data!.outcome,
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

  it('logs one line per gateway call, with its fields and no key', async () => {
    const oa = await createTenant(t, { baseUrl: openaiUp.url, providerKey: keys.openai, quotaUnits: 1000n });
    const an = await createTenant(t, { profile: 'anthropic', baseUrl: anthropicUp.url, providerKey: keys.anthropic });
    const openai = (apiKey: string, headers: Record<string, string> = {}) =>
      new OpenAI({ baseURL: `${oa.gatewayBaseUrl}/v1`, apiKey, fetch: gatewayFetch(), maxRetries: 0, defaultHeaders: headers });
    const ids: Record<string, string> = {};
    const chat = await openai(oa.apiKey, { 'x-fake-usage': '12,4,2' })
      .chat.completions.create({ model: 'gpt-scan', messages: [{ role: 'user', content: 'hi' }], max_tokens: 20 })
      .withResponse();
    ids.json = chat.response.headers.get('x-nexus-request-id')!;
    const streamed = await openai(oa.apiKey)
      .chat.completions.create({ model: 'gpt-scan', messages: [{ role: 'user', content: 'hi' }], max_tokens: 20, stream: true })
      .withResponse();
    for await (const _ of streamed.data) void _;
    ids.stream = streamed.response.headers.get('x-nexus-request-id')!;
    const message = await new Anthropic({ baseURL: an.gatewayBaseUrl, apiKey: an.apiKey, fetch: gatewayFetch(), maxRetries: 0 }).messages
      .create({ model: 'claude-scan', max_tokens: 20, messages: [{ role: 'user', content: 'hi' }] })
      .withResponse();
    ids.anthropic = message.response.headers.get('x-nexus-request-id')!;
    // An upstream error, a refusal for quota and one before any key is known.
    const failed = await openai(oa.apiKey, { 'x-fake-fault': 'status-500' })
      .chat.completions.create({ model: 'gpt-scan', messages: [], max_tokens: 20 })
      .catch((err: { headers: Headers }) => err);
    ids.upstreamError = (failed as { headers: Headers }).headers.get('x-nexus-request-id')!;
    const refused = await openai(oa.apiKey)
      .chat.completions.create({ model: 'gpt-scan', messages: [], max_tokens: 900 })
      .catch((err: { headers: Headers }) => err);
    ids.quota = (refused as { headers: Headers }).headers.get('x-nexus-request-id')!;
    const unknown = await openai(`nx-test-${SECRET_MARKER}-not-a-key`)
      .chat.completions.create({ model: 'gpt-scan', messages: [] })
      .catch((err: { headers: Headers }) => err);
    ids.invalidKey = (unknown as { headers: Headers }).headers.get('x-nexus-request-id')!;
    await t.nexus.gateway.drain();

    const lines = t.logs.map((l) => JSON.parse(l) as Record<string, unknown>);
    const lineOf = (requestId: string) => {
      const found = lines.filter((l) => l.requestId === requestId && l.msg === 'request');
      expect(found, requestId).toHaveLength(1);
      return found[0]!;
    };
    const call = {
      workspaceId: oa.workspaceId,
      connectionId: oa.connectionId,
      accessId: oa.accessId,
      model: 'gpt-scan',
      metering: 'metered',
    };
    expect(lineOf(ids.json)).toMatchObject({
      ...call,
      method: 'POST',
      operationId: 'proxyProviderPost',
      status: 200,
      upstreamStatus: 200,
      outcome: 'SUCCEEDED',
      streamed: false,
      inputTokens: 12,
      cachedTokens: 2,
      outputTokens: 4,
      units: 12 - 2 + 1 + 4 * 2,
    });
    for (const field of ['durationMs', 'upstreamMs', 'addedMs']) expect(lineOf(ids.json)[field], field).toBeTypeOf('number');
    expect(lineOf(ids.stream)).toMatchObject({ ...call, status: 200, outcome: 'SUCCEEDED', streamed: true });
    for (const field of ['ttftMs', 'upstreamTtftMs']) expect(lineOf(ids.stream)[field], field).toBeTypeOf('number');
    expect(lineOf(ids.anthropic)).toMatchObject({
      workspaceId: an.workspaceId,
      model: 'claude-scan',
      status: 200,
      outcome: 'SUCCEEDED',
      metering: 'metered',
    });
    expect(lineOf(ids.upstreamError)).toMatchObject({ ...call, status: 500, upstreamStatus: 500, outcome: 'UPSTREAM_ERROR', units: 0 });
    expect(lineOf(ids.quota)).toMatchObject({
      ...call,
      status: 429,
      outcome: 'REJECTED',
      errorCode: 'quota_insufficient',
      upstreamStatus: null,
    });
    expect(lineOf(ids.invalidKey)).toMatchObject({ status: 401, errorCode: 'invalid_inference_key', operationId: 'proxyProviderPost' });
    const gatewayLines = Object.values(ids).map((id) => JSON.stringify(lineOf(id)));
    for (const line of gatewayLines) {
      expect(line).not.toContain(SECRET_MARKER);
      for (const secret of [oa.apiKey, an.apiKey]) expect(line).not.toContain(secret);
    }
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
