/**
 * Bedrock Runtime through the gateway (src/protocols/bedrock.ts), with the official
 * `@aws-sdk/client-bedrock-runtime` against the fake Bedrock upstream (test/support/upstreams/bedrock.ts):
 * Converse and ConverseStream metered exactly, the upstream's Bedrock API key and SigV4 signature,
 * the cap, InvokeModel refused, a broken event-stream frame, and a bedrock connection's bad input.
 */
import {
  ConverseCommand,
  ConverseStreamCommand,
  CountTokensCommand,
  InvokeModelCommand,
  type ConverseStreamOutput,
} from '@aws-sdk/client-bedrock-runtime';
import { StandardRetryStrategy } from '@smithy/core/retry';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SECRET_MARKER } from '../security/secret-marker.js';
import {
  createProviderConnection,
  getInvocation,
  listAuditLogs,
  listInvocations,
  rotateProviderSecret,
  testProviderConnection,
  updateProviderConnection,
  verifyProviderConnection,
} from '../support/sdk.js';
import { startBedrockUpstream, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { bedrockFor, createTenant, periodOf, until, type Tenant } from './gateway-support.js';

/**
 * docs/sdk-retries.md's strategy: the SDK's standard retries, except of the gateway's quota refusal (the SDK
 * retries every 429 by its status, whatever its name; the quota used up does not free by retrying).
 */
class NoQuotaRetries extends StandardRetryStrategy {
  override async refreshRetryTokenForRetry(...[token, errorInfo]: Parameters<StandardRetryStrategy['refreshRetryTokenForRetry']>) {
    if (errorInfo.error?.name === 'ServiceQuotaExceededException') throw errorInfo.error;
    return super.refreshRetryTokenForRetry(token, errorInfo);
  }
}

let t: TestApp;
let up: FakeUpstream;
const API_KEY = `${SECRET_MARKER}-bedrock-api-key-0123456789`;
const SIGV4 = {
  accessKeyId: 'AKIAFAKEBEDROCK00001',
  secretAccessKey: `${SECRET_MARKER}-bedrock-secret-access-key`,
  sessionToken: `${SECRET_MARKER}-bedrock-session-token`,
  region: 'us-east-1',
};
const MODEL = 'anthropic.claude-3-haiku-20240307-v1:0';

beforeAll(async () => {
  t = await startTestApp({ env: { NEXUS_AUTH_CACHE_TTL_MS: '0' } });
  up = await startBedrockUpstream({ apiKeys: [API_KEY], sigv4: SIGV4 });
});
afterAll(async () => {
  await t?.close();
  await up?.close();
});

const apiKeyTenant = (o: Partial<Parameters<typeof createTenant>[1]> = {}) =>
  createTenant(t, { profile: 'bedrock', baseUrl: up.url, providerKey: API_KEY, aws: { awsRegion: 'us-east-1' }, ...o });
const sigv4Tenant = (o: Partial<Parameters<typeof createTenant>[1]> = {}) =>
  createTenant(t, {
    profile: 'bedrock',
    baseUrl: up.url,
    providerKey: SIGV4.secretAccessKey,
    aws: { awsRegion: SIGV4.region, awsAccessKeyId: SIGV4.accessKeyId, awsSessionToken: SIGV4.sessionToken },
    ...o,
  });

async function invocations(tenant: Tenant) {
  await t.nexus.gateway.drain();
  const list = await listInvocations({ client: t.client, path: { workspaceId: tenant.workspaceId }, query: { limit: 100 } });
  return Promise.all(list.data!.map(async (i) => (await getInvocation({ client: t.client, path: { invocationId: i.id } })).data!));
}

const converse = (maxTokens?: number) =>
  new ConverseCommand({
    modelId: MODEL,
    messages: [{ role: 'user', content: [{ text: 'Say hello' }] }],
    ...(maxTokens !== undefined ? { inferenceConfig: { maxTokens } } : {}),
  });
const converseStream = (maxTokens?: number) =>
  new ConverseStreamCommand({
    modelId: MODEL,
    messages: [{ role: 'user', content: [{ text: 'Say hello' }] }],
    ...(maxTokens !== undefined ? { inferenceConfig: { maxTokens } } : {}),
  });

async function drainStream(stream: AsyncIterable<ConverseStreamOutput> | undefined) {
  let text = '';
  let stopReason: string | undefined;
  let usage: Record<string, unknown> | undefined;
  for await (const event of stream!) {
    if (event.contentBlockDelta?.delta?.text) text += event.contentBlockDelta.delta.text;
    if (event.messageStop) stopReason = event.messageStop.stopReason;
    if (event.metadata) usage = { ...event.metadata.usage };
  }
  return { text, stopReason, usage };
}

describe('Converse and ConverseStream through the SDK', () => {
  it('Converse with a Bedrock API key: the answer as the upstream gave it, metered exactly (cache reads and writes are input)', async () => {
    const tenant = await apiKeyTenant();
    const client = bedrockFor(tenant, { 'x-fake-usage': '12,4,6,3' });
    const out = await client.send(converse(50));
    expect(out.output?.message?.content?.[0]?.text).toBe('alpha beta gamma delta');
    expect(out.usage).toMatchObject({ inputTokens: 12, outputTokens: 4, cacheReadInputTokens: 6, cacheWriteInputTokens: 3 });
    const seen = up.requests.at(-1)!;
    expect(seen.url).toBe(`/model/${encodeURIComponent(MODEL)}/converse`);
    expect(seen.headers.authorization).toBe(`Bearer ${API_KEY}`);
    const [inv] = await invocations(tenant);
    expect(inv).toMatchObject({ status: 'SUCCEEDED', requestedModel: MODEL });
    expect(inv!.usageEvents).toHaveLength(1);
    // 12 uncached + 6 read + 3 written = 21 input, 6 of them cached; 4 output.
    expect(inv!.usageEvents![0]).toMatchObject({ inputTokens: '21', cachedInputTokens: '6', outputTokens: '4' });
    // 15 input at 1, 6 cached at 0.5, 4 output at 2.
    expect(inv!.quotaUnits).toBe('26');
    expect((await periodOf(t, tenant.accessId)).consumed).toBe(26n);
  });

  it('ConverseStream signed with SigV4 (the fake verifies the signature): decoded by the SDK, metered from the metadata event', async () => {
    const tenant = await sigv4Tenant();
    const client = bedrockFor(tenant, { 'x-fake-usage': '9,3,2,0', 'x-fake-fault': 'split' });
    const out = await client.send(converseStream(20));
    expect(out.$metadata.requestId).toBe('req-fake-bedrock');
    const read = await drainStream(out.stream);
    expect(read).toMatchObject({ text: 'alpha beta gamma', stopReason: 'end_turn', usage: { inputTokens: 9, outputTokens: 3 } });
    const seen = up.requests.at(-1)!;
    expect(seen.headers.authorization).toMatch(
      /^AWS4-HMAC-SHA256 Credential=AKIAFAKEBEDROCK00001\/\d{8}\/us-east-1\/bedrock\/aws4_request/,
    );
    expect(seen.headers['x-amz-security-token']).toBe(SIGV4.sessionToken);
    const [inv] = await invocations(tenant);
    expect(inv).toMatchObject({ status: 'SUCCEEDED', requestedModel: MODEL });
    expect(inv!.usageEvents![0]).toMatchObject({ inputTokens: '11', cachedInputTokens: '2', outputTokens: '3' });
  });

  it('a signature the upstream does not accept (a wrong secret key) is its 403, relayed and charged nothing', async () => {
    const tenant = await sigv4Tenant({ providerKey: `${SECRET_MARKER}-not-the-secret-access-key` });
    await expect(bedrockFor(tenant).send(converse(10))).rejects.toMatchObject({
      name: 'UnrecognizedClientException',
      message: 'The security token included in the request is invalid.',
      $metadata: { httpStatusCode: 403, requestId: 'req-fake-bedrock' },
    });
    const [inv] = await invocations(tenant);
    expect(inv).toMatchObject({ status: 'UPSTREAM_ERROR', quotaUnits: '0' });
  });

  it('an ARN as the model (its slash sent encoded) is the model the call names', async () => {
    const tenant = await apiKeyTenant();
    const arn = 'arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-haiku-20240307-v1:0';
    await bedrockFor(tenant)
      .send(new ConverseCommand({ modelId: arn, messages: [{ role: 'user', content: [{ text: 'hi' }] }] }))
      .catch((err: unknown) => err);
    const [inv] = await invocations(tenant);
    expect(inv!.requestedModel).toBe(arn);
  });
});

describe('the rules of a plan, on the model of the path', () => {
  it('a model outside the allow-list is 403 before the upstream is called; one in it is priced by its model rule', async () => {
    const tenant = await apiKeyTenant({
      allowedModels: ['anthropic.*'],
      modelRules: [
        {
          pattern: 'anthropic.claude-3-haiku*',
          inputMultiplierPpm: '3000000',
          cachedInputMultiplierPpm: '1000000',
          outputMultiplierPpm: '5000000',
        },
      ],
    });
    const client = bedrockFor(tenant, { 'x-fake-usage': '10,2,0,0' });
    const before = up.requests.length;
    const refused = await client
      .send(new ConverseCommand({ modelId: 'meta.llama3-8b-instruct-v1:0', messages: [{ role: 'user', content: [{ text: 'hi' }] }] }))
      .catch((e: unknown) => e as { $metadata: { httpStatusCode: number } });
    expect(refused.$metadata.httpStatusCode).toBe(403);
    expect(up.requests.length).toBe(before);
    await client.send(converse(5));
    const list = await invocations(tenant);
    const ok = list.find((i) => i.status === 'SUCCEEDED')!;
    // 10 input at 3, 2 output at 5.
    expect(ok.quotaUnits).toBe('40');
    expect(list.find((i) => i.status === 'REJECTED')).toMatchObject({
      errorCode: 'model_not_allowed',
      requestedModel: 'meta.llama3-8b-instruct-v1:0',
    });
  });

  it('CountTokens is free: answered, recorded with 0 units, and refused 403 for a model outside the allow-list', async () => {
    const tenant = await apiKeyTenant({ allowedModels: ['anthropic.*'] });
    const client = bedrockFor(tenant);
    const input = { converse: { messages: [{ role: 'user' as const, content: [{ text: 'count me' }] }] } };
    const counted = await client.send(new CountTokensCommand({ modelId: MODEL, input }));
    expect(counted.inputTokens).toBeGreaterThan(0);
    const refused = await client
      .send(new CountTokensCommand({ modelId: 'meta.llama3-8b-instruct-v1:0', input }))
      .catch((e: unknown) => e as { $metadata: { httpStatusCode: number } });
    expect(refused.$metadata.httpStatusCode).toBe(403);
    const list = await invocations(tenant);
    expect(list.find((i) => i.status === 'SUCCEEDED')).toMatchObject({ requestedModel: MODEL, quotaUnits: '0' });
    expect((await periodOf(t, tenant.accessId)).consumed).toBe(0n);
  });

  it("the plan's rate limit holds: a call past its requests per minute is 429, the upstream not called", async () => {
    const tenant = await apiKeyTenant({ rateLimits: { requestsPerMinute: 1 } });
    const client = bedrockFor(tenant);
    await client.send(converse(5));
    const before = up.requests.length;
    const limited = await client.send(converse(5)).catch((e: unknown) => e as { $metadata: { httpStatusCode: number } });
    expect(limited.$metadata.httpStatusCode).toBe(429);
    expect(up.requests.length).toBe(before);
    expect((await invocations(tenant)).find((i) => i.status === 'REJECTED')).toMatchObject({ errorCode: 'rate_limited' });
  });

  it('GET {gatewayBaseUrl}/v1/me answers the end user on a bedrock connection', async () => {
    const tenant = await apiKeyTenant();
    const res = await fetch(`${tenant.gatewayBaseUrl}/v1/me`, { headers: { authorization: `Bearer ${tenant.apiKey}` } });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ accessId: tenant.accessId });
  });
});

describe("the gateway's own refusals, as the AWS SDK raises them", () => {
  /** What the SDK raised: its exception's name and message, the status and the request id it read. */
  const raised = (call: Promise<unknown>) =>
    call.then(
      () => {
        throw new Error('the call was not refused');
      },
      (e: unknown) => {
        const err = e as Error & { $fault: string; $metadata: { httpStatusCode: number; requestId?: string } };
        return {
          name: err.name,
          message: err.message,
          fault: err.$fault,
          status: err.$metadata.httpStatusCode,
          requestId: err.$metadata.requestId,
        };
      },
    );

  /** The request id of the tenant's one REJECTED invocation: the SDK's must be it. */
  const rejectedId = async (tenant: Tenant) => (await invocations(tenant)).find((i) => i.status === 'REJECTED')!.requestId;

  it('400 is a ValidationException, with the message and the request id of the gateway', async () => {
    const tenant = await apiKeyTenant({ maxOutputTokens: 40, outputCapPolicy: 'refuse' });
    const err = await raised(bedrockFor(tenant).send(converse(500)));
    expect(err).toMatchObject({ name: 'ValidationException', status: 400, fault: 'client' });
    expect(err.message).toMatch(/inferenceConfig\.maxTokens may be at most 40/);
    expect(err.requestId).toBe(await rejectedId(tenant));
  });

  it('403 (a model outside the allow-list) is an AccessDeniedException', async () => {
    const tenant = await apiKeyTenant({ allowedModels: ['anthropic.*'] });
    const command = new ConverseCommand({
      modelId: 'meta.llama3-8b-instruct-v1:0',
      messages: [{ role: 'user', content: [{ text: 'hi' }] }],
    });
    const err = await raised(bedrockFor(tenant).send(command));
    expect(err).toMatchObject({
      name: 'AccessDeniedException',
      status: 403,
      message: "The model 'meta.llama3-8b-instruct-v1:0' is not allowed on this plan",
    });
    expect(err.requestId).toBe(await rejectedId(tenant));
  });

  it('409 (InvokeModel) is a ConflictException', async () => {
    const tenant = await apiKeyTenant();
    const err = await raised(bedrockFor(tenant).send(new InvokeModelCommand({ modelId: MODEL, body: '{}' })));
    expect(err).toMatchObject({ name: 'ConflictException', status: 409 });
    expect(err.message).toMatch(/use Converse or ConverseStream/);
    expect(err.requestId).toMatch(/\S/);
  });

  it('429 (a rate limit) is a ThrottlingException', async () => {
    const tenant = await apiKeyTenant({ rateLimits: { requestsPerMinute: 1 } });
    const client = bedrockFor(tenant);
    await client.send(converse(5));
    const err = await raised(client.send(converse(5)));
    expect(err).toMatchObject({ name: 'ThrottlingException', status: 429 });
    expect(err.message).toMatch(/requests per minute are used up/);
    expect(err.requestId).toBe(await rejectedId(tenant));
  });

  it('429 (the quota used up) is a ServiceQuotaExceededException, not a throttle, the upstream not called', async () => {
    const tenant = await apiKeyTenant({ quotaUnits: 50n });
    const before = up.requests.length;
    const err = await raised(bedrockFor(tenant).send(converse(1000)));
    expect(err).toMatchObject({ name: 'ServiceQuotaExceededException', status: 429, fault: 'client' });
    expect(err.message).toMatch(/; 50 are available$/);
    expect(err.requestId).toBe(await rejectedId(tenant));
    expect(up.requests.length).toBe(before);
  });

  it("the retry strategy of docs/sdk-retries.md makes one request of a quota refusal, where the SDK's own makes three", async () => {
    const refusals = async (config: Parameters<typeof bedrockFor>[3]) => {
      const tenant = await apiKeyTenant({ quotaUnits: 50n });
      const err = await raised(bedrockFor(tenant, {}, undefined, config).send(converse(1000)));
      expect(err).toMatchObject({ name: 'ServiceQuotaExceededException', status: 429 });
      return (await invocations(tenant)).filter((i) => i.status === 'REJECTED').map((i) => i.errorCode);
    };
    expect(await refusals({ maxAttempts: 3, retryStrategy: new NoQuotaRetries(3) })).toEqual(['quota_insufficient']);
    // The SDK's own strategy retries every 429, whatever the exception's name.
    expect(await refusals({ maxAttempts: 3 })).toEqual(['quota_insufficient', 'quota_insufficient', 'quota_insufficient']);
  });

  it('502 (the upstream unreachable) is a ServiceUnavailableException, a server fault', async () => {
    const tenant = await createTenant(t, {
      profile: 'bedrock',
      baseUrl: 'http://127.0.0.1:9',
      providerKey: API_KEY,
      aws: { awsRegion: 'us-east-1' },
    });
    const err = await raised(bedrockFor(tenant).send(converse(5)));
    expect(err).toMatchObject({ name: 'ServiceUnavailableException', status: 502, fault: 'server' });
    expect(err.requestId).toMatch(/\S/);
  });
});

describe('the cap: inferenceConfig.maxTokens', () => {
  it('a request without a cap is sent with the plan maxOutputTokens; one above it is lowered to it', async () => {
    const tenant = await apiKeyTenant({ maxOutputTokens: 40 });
    const client = bedrockFor(tenant);
    await client.send(converse());
    expect(JSON.parse(up.requests.at(-1)!.body).inferenceConfig).toEqual({ maxTokens: 40 });
    await client.send(converse(500));
    expect(JSON.parse(up.requests.at(-1)!.body).inferenceConfig).toEqual({ maxTokens: 40 });
    await client.send(converse(7));
    expect(JSON.parse(up.requests.at(-1)!.body).inferenceConfig).toEqual({ maxTokens: 7 });
  });

  it('a cap above the plan with outputCapPolicy refuse is 400, the upstream not called', async () => {
    const tenant = await apiKeyTenant({ maxOutputTokens: 40, outputCapPolicy: 'refuse' });
    const before = up.requests.length;
    await expect(bedrockFor(tenant).send(converse(500))).rejects.toMatchObject({ $metadata: { httpStatusCode: 400 } });
    expect(up.requests.length).toBe(before);
  });

  it('a stream past its output bound is cut there: the SDK reads max_tokens and the usage charged', async () => {
    const tenant = await apiKeyTenant({ maxOutputTokens: 3 });
    const client = bedrockFor(tenant, { 'x-fake-usage': '10,8,0,0', 'x-fake-fault': 'runaway' });
    const read = await drainStream((await client.send(converseStream(3))).stream);
    expect(read.stopReason).toBe('max_tokens');
    expect(read.text).toBe('alpha beta gamma');
    expect(read.usage).toMatchObject({ outputTokens: 3 });
    const [inv] = await invocations(tenant);
    expect(inv).toMatchObject({ errorCode: 'output_bound_exceeded' });
    expect(inv!.usageEvents![0]).toMatchObject({ outputTokens: '3' });
  });
});

describe('what the gateway cannot meter', () => {
  it('InvokeModel is refused (409) even where the workspace allows unmetered calls, the upstream not called', async () => {
    const tenant = await apiKeyTenant({ allowUnmeteredPassthrough: true });
    const before = up.requests.length;
    const err = await bedrockFor(tenant)
      .send(new InvokeModelCommand({ modelId: MODEL, body: JSON.stringify({ max_tokens: 5, messages: [] }) }))
      .catch((e: unknown) => e as { $metadata: { httpStatusCode: number } });
    expect(err.$metadata.httpStatusCode).toBe(409);
    expect(up.requests.length).toBe(before);
  });

  it('a broken event-stream frame: the frames before it, then an error the SDK raises; recorded by the missing-usage rule and counted', async () => {
    const tenant = await apiKeyTenant();
    const client = bedrockFor(tenant, { 'x-fake-usage': '10,5,0,0', 'x-fake-fault': 'broken-frame' });
    const out = await client.send(converseStream(20));
    let text = '';
    const failure = await (async () => {
      for await (const event of out.stream!) text += event.contentBlockDelta?.delta?.text ?? '';
    })().catch((e: unknown) => e as Error);
    expect(failure).toBeInstanceOf(Error);
    expect((failure as Error).message).toMatch(/event stream broke/);
    expect(text).toBe('alpha');
    // The upstream request is aborted, not read to its end (its remaining frames would take 4 s).
    await until(async () => up.open() === 0, 2500);
    const [inv] = await invocations(tenant);
    expect(inv).toMatchObject({ errorCode: 'usage_missing' });
    // No usage read: the input bound, and the output seen (at least the frames read), within the bound.
    expect(BigInt(inv!.usageEvents![0]!.outputTokens)).toBeGreaterThanOrEqual(1n);
    expect(BigInt(inv!.usageEvents![0]!.outputTokens)).toBeLessThanOrEqual(20n);
    const metrics = await (await fetch(`${t.url}/metrics`)).text();
    expect(metrics).toMatch(/nexus_gateway_usage_missing_total\{protocol="aws\.bedrock",kind="stream"\} [1-9]/);
  });

  it('a Converse answer without usage is charged its bound and recorded usage_missing', async () => {
    const tenant = await apiKeyTenant();
    await bedrockFor(tenant, { 'x-fake-fault': 'no-usage' }).send(converse(10));
    const [inv] = await invocations(tenant);
    expect(inv).toMatchObject({ errorCode: 'usage_missing' });
    expect(inv!.usageEvents![0]).toMatchObject({ outputTokens: '10' });
  });
});

describe('a bedrock connection', () => {
  const workspace = async () => (await apiKeyTenant()).workspaceId;
  const create = async (workspaceId: string, body: Record<string, unknown>) =>
    createProviderConnection({
      client: t.client,
      path: { workspaceId },
      body: { name: 'b', protocolProfile: 'bedrock', baseUrl: up.url, apiKey: API_KEY, ...body } as never,
    });

  it.each([
    ['no awsRegion', {}, 'awsRegion'],
    ['a session token without an access key id', { awsRegion: 'us-east-1', awsSessionToken: 'token-token' }, 'awsAccessKeyId'],
    ['no apiKey', { awsRegion: 'us-east-1', apiKey: undefined }, 'apiKey'],
  ])('created with %s is 400 naming the field, nothing made', async (_label, body, param) => {
    const workspaceId = await workspace();
    const res = await create(workspaceId, body);
    expect(res.response.status).toBe(400);
    expect((res.error as { error: { param: string } }).error.param).toBe(param);
  });

  it('awsRegion on another profile is 400', async () => {
    const workspaceId = await workspace();
    const res = await createProviderConnection({
      client: t.client,
      path: { workspaceId },
      body: { name: 'o', protocolProfile: 'openai', baseUrl: up.url, apiKey: API_KEY, awsRegion: 'us-east-1' },
    });
    expect(res.response.status).toBe(400);
    expect((res.error as { error: { param: string } }).error.param).toBe('awsRegion');
  });

  it('never returns the secret: the preview shows the access key id; the audit and the answer hold no secret', async () => {
    const tenant = await sigv4Tenant();
    const res = await createProviderConnection({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      body: {
        name: 's',
        protocolProfile: 'bedrock',
        baseUrl: up.url,
        apiKey: SIGV4.secretAccessKey,
        awsRegion: 'us-east-1',
        awsAccessKeyId: SIGV4.accessKeyId,
        awsSessionToken: SIGV4.sessionToken,
      },
    });
    expect(res.response.status).toBe(201);
    const text = JSON.stringify(res.data);
    expect(text).not.toContain(SECRET_MARKER);
    expect(text).not.toContain(SIGV4.accessKeyId);
    expect(res.data!.secretPreview).toMatch(/0001$/);
    await rotateProviderSecret({
      client: t.client,
      path: { providerConnectionId: res.data!.id },
      body: { apiKey: SIGV4.secretAccessKey, awsAccessKeyId: SIGV4.accessKeyId, awsSessionToken: SIGV4.sessionToken },
    });
    const audit = await listAuditLogs({ client: t.client, path: { workspaceId: tenant.workspaceId }, query: { limit: 100 } });
    const entries = JSON.stringify(audit.data);
    expect(entries).toContain('provider_connection.secret_rotated');
    expect(entries).not.toContain(SECRET_MARKER);
    expect(entries).not.toContain(SIGV4.accessKeyId);
  });

  it('testProviderConnection probes with the connection auth: a Bedrock API key, SigV4, and a wrong key', async () => {
    const workspaceId = await workspace();
    const probe = (body: Record<string, unknown>) =>
      testProviderConnection({
        client: t.client,
        path: { workspaceId },
        body: { protocolProfile: 'bedrock', baseUrl: up.url, awsRegion: 'us-east-1', ...body } as never,
      });
    expect((await probe({ apiKey: API_KEY })).data).toMatchObject({ outcome: 'reachable' });
    expect(
      (await probe({ apiKey: SIGV4.secretAccessKey, awsAccessKeyId: SIGV4.accessKeyId, awsSessionToken: SIGV4.sessionToken })).data,
    ).toMatchObject({ outcome: 'reachable' });
    expect((await probe({ apiKey: `${SECRET_MARKER}-wrong-bedrock-key` })).data).toMatchObject({ outcome: 'credentials_rejected' });
  });

  it('verifyProviderConnection probes with the stored credential (SigV4)', async () => {
    const tenant = await sigv4Tenant();
    const res = await verifyProviderConnection({ client: t.client, path: { providerConnectionId: tenant.connectionId } });
    expect(res.data).toMatchObject({ outcome: 'reachable' });
    expect(up.requests.at(-1)!.headers.authorization).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIAFAKEBEDROCK00001\//);
  });

  it('an update: the AWS fields without apiKey are 400 naming apiKey, nothing changed; with it, the connection signs with SigV4', async () => {
    const tenant = await apiKeyTenant();
    const path = { providerConnectionId: tenant.connectionId };
    const alone = await updateProviderConnection({ client: t.client, path, body: { awsRegion: 'eu-west-1' } });
    expect(alone.response.status).toBe(400);
    expect((alone.error as { error: { param: string } }).error.param).toBe('apiKey');
    const signed = await updateProviderConnection({
      client: t.client,
      path,
      body: { apiKey: SIGV4.secretAccessKey, awsAccessKeyId: SIGV4.accessKeyId, awsSessionToken: SIGV4.sessionToken },
    });
    expect(signed.response.status).toBe(200);
    expect(signed.data!.secretPreview).toMatch(/0001$/);
    await bedrockFor(tenant).send(converse(5));
    expect(up.requests.at(-1)!.headers.authorization).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIAFAKEBEDROCK00001\/\d{8}\/us-east-1\//);
  });

  it('rotating to a Bedrock API key keeps the region; the next call uses the new key', async () => {
    const tenant = await sigv4Tenant();
    const res = await rotateProviderSecret({
      client: t.client,
      path: { providerConnectionId: tenant.connectionId },
      body: { apiKey: API_KEY },
    });
    expect(res.response.status).toBe(200);
    await bedrockFor(tenant).send(converse(5));
    expect(up.requests.at(-1)!.headers.authorization).toBe(`Bearer ${API_KEY}`);
  });
});
