/**
 * The output bound against an upstream that ignores max_tokens (docs/reliability.md
 * "The output bound"), through the official SDKs: a stream is cut at the bound with a
 * well-formed end and charged the bound, and the upstream request is aborted; a JSON
 * answer over the bound is charged as reported and counted in the metrics.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getInvocation, listInvocations } from '../support/sdk.js';
import { SECRET_MARKER } from '../security/secret-marker.js';
import { startAnthropicUpstream, startOpenAiUpstream, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { anthropicFor, createTenant, openAiFor, periodOf, until, type Tenant } from './gateway-support.js';

let t: TestApp;
let openaiUp: FakeUpstream;
let anthropicUp: FakeUpstream;
const KEY = `${SECRET_MARKER}-upstream-bound-0123456789`;

beforeAll(async () => {
  t = await startTestApp();
  openaiUp = await startOpenAiUpstream({ apiKey: KEY });
  anthropicUp = await startAnthropicUpstream({ apiKey: KEY });
});
afterAll(async () => {
  await t?.close();
  await openaiUp?.close();
  await anthropicUp?.close();
});

/** 500 output tokens, one word an event every 5 ms (2.5 s in all), whatever max_tokens says. */
const RUNAWAY = { 'x-fake-fault': 'runaway', 'x-fake-usage': '10,500,0', 'x-fake-delay-ms': '5' };
const BOUND = 20;

const openai = (tenant: Tenant, headers: Record<string, string> = RUNAWAY) => openAiFor(tenant, headers);
const anthropic = (tenant: Tenant) => anthropicFor(tenant, RUNAWAY);

const words = (text: string) => text.trim().split(/\s+/).filter(Boolean);

/** The tenant's one call, once recorded. */
async function onlyInvocation(tenant: Tenant) {
  await t.nexus.gateway.drain();
  const list = await listInvocations({ client: t.client, path: { workspaceId: tenant.workspaceId }, query: { limit: 10 } });
  expect(list.data).toHaveLength(1);
  return (await getInvocation({ client: t.client, path: { invocationId: list.data![0]!.id } })).data!;
}

async function overBound(kind: 'stream' | 'json'): Promise<number> {
  const text = await (await fetch(`${t.url}/metrics`)).text();
  return Number(new RegExp(`nexus_gateway_output_over_bound_total\\{kind="${kind}"\\} (\\d+)`).exec(text)?.[1] ?? 0);
}

/** The stream's call: charged its bound exactly (input as reported or bounded, output the bound), nothing held. */
async function expectChargedTheBound(tenant: Tenant, input: number) {
  const inv = await onlyInvocation(tenant);
  expect(inv).toMatchObject({ status: 'SUCCEEDED', errorCode: 'output_bound_exceeded' });
  expect(inv.usageEvents).toHaveLength(1);
  expect(inv.usageEvents![0]).toMatchObject({ kind: 'USAGE', inputTokens: String(input), outputTokens: String(BOUND) });
  // Input 1 unit a token, output 2: the bound the call was admitted with.
  const bound = BigInt(input + 2 * BOUND);
  expect(inv.quotaUnits).toBe(String(bound));
  const period = await periodOf(t, tenant.accessId);
  expect(period).toMatchObject({ consumed: bound, reserved: 0n });
}

/** The upstream's request is over long before its 2.5 s of output: the gateway aborted it. */
async function expectUpstreamAborted(up: FakeUpstream) {
  await until(async () => up.open() === 0, 1000);
}

describe('a stream past its output bound is cut there', () => {
  it('OpenAI chat: finish_reason length, the usage asked for, [DONE]; charged the bound', async () => {
    const tenant = await createTenant(t, { baseUrl: openaiUp.url, providerKey: KEY });
    const before = await overBound('stream');
    const runner = openai(tenant).chat.completions.stream({
      model: 'gpt-test',
      messages: [{ role: 'user', content: 'Go on' }],
      max_tokens: BOUND,
      stream_options: { include_usage: true },
    });
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of runner) chunks.push(chunk);
    const final = await runner.finalChatCompletion();
    expect(final.choices[0]!.finish_reason).toBe('length');
    expect(words(final.choices[0]!.message.content!)).toHaveLength(BOUND);
    expect(final.usage).toMatchObject({ completion_tokens: BOUND });
    expect(chunks.at(-1)!.usage?.completion_tokens).toBe(BOUND);
    await expectUpstreamAborted(openaiUp);
    await expectChargedTheBound(tenant, final.usage!.prompt_tokens);
    expect(await overBound('stream')).toBe(before + 1);
  });

  it('OpenAI chat without usage asked: no usage chunk reaches the client', async () => {
    const tenant = await createTenant(t, { baseUrl: openaiUp.url, providerKey: KEY });
    const stream = await openai(tenant).chat.completions.create({
      model: 'gpt-test',
      messages: [{ role: 'user', content: 'Go on' }],
      max_tokens: BOUND,
      stream: true,
    });
    let text = '';
    const finishes: (string | null)[] = [];
    for await (const chunk of stream) {
      expect(chunk.usage ?? null).toBeNull();
      text += chunk.choices[0]?.delta.content ?? '';
      finishes.push(chunk.choices[0]?.finish_reason ?? null);
    }
    expect(words(text)).toHaveLength(BOUND);
    expect(finishes.at(-1)).toBe('length');
    await expectUpstreamAborted(openaiUp);
    const inv = await onlyInvocation(tenant);
    expect(inv.usageEvents![0]!.outputTokens).toBe(String(BOUND));
  });

  it('OpenAI Responses API: response.incomplete with reason max_output_tokens; charged the bound', async () => {
    const tenant = await createTenant(t, { baseUrl: openaiUp.url, providerKey: KEY });
    const stream = openai(tenant).responses.stream({ model: 'gpt-r', input: 'Go on', max_output_tokens: BOUND });
    const types: string[] = [];
    for await (const event of stream) types.push(event.type);
    const final = await stream.finalResponse();
    expect(types.at(-1)).toBe('response.incomplete');
    expect(final.status).toBe('incomplete');
    expect(final.incomplete_details?.reason).toBe('max_output_tokens');
    expect(words(final.output_text)).toHaveLength(BOUND);
    expect(final.usage).toMatchObject({ output_tokens: BOUND });
    await expectUpstreamAborted(openaiUp);
    await expectChargedTheBound(tenant, final.usage!.input_tokens);
  });

  it('Anthropic messages: stop_reason max_tokens and message_stop; input as reported, output the bound', async () => {
    const tenant = await createTenant(t, { profile: 'anthropic', baseUrl: anthropicUp.url, providerKey: KEY });
    const stream = anthropic(tenant).messages.stream({
      model: 'claude-test',
      max_tokens: BOUND,
      messages: [{ role: 'user', content: 'Go on' }],
    });
    const types: string[] = [];
    for await (const event of stream) types.push(event.type);
    const final = await stream.finalMessage();
    expect(types.slice(-3)).toEqual(['content_block_stop', 'message_delta', 'message_stop']);
    expect(final.stop_reason).toBe('max_tokens');
    expect(final.usage.output_tokens).toBe(BOUND);
    const block = final.content[0]!;
    expect(block.type === 'text' && words(block.text)).toHaveLength(BOUND);
    await expectUpstreamAborted(anthropicUp);
    // message_start reported 10 input tokens.
    await expectChargedTheBound(tenant, 10);
  });
});

describe('a JSON answer past its output bound', () => {
  it('is charged the usage reported, flagged, and counted in the metrics', async () => {
    const tenant = await createTenant(t, { baseUrl: openaiUp.url, providerKey: KEY });
    const before = await overBound('json');
    const answer = await openai(tenant, { 'x-fake-fault': 'runaway', 'x-fake-usage': '10,500,0' }).chat.completions.create({
      model: 'gpt-test',
      messages: [{ role: 'user', content: 'Go on' }],
      max_tokens: BOUND,
    });
    expect(answer.usage!.completion_tokens).toBe(500);
    expect(words(answer.choices[0]!.message.content!)).toHaveLength(500);
    const inv = await onlyInvocation(tenant);
    expect(inv).toMatchObject({ status: 'SUCCEEDED', errorCode: 'output_bound_exceeded', quotaUnits: String(10 + 2 * 500) });
    expect(inv.usageEvents!.find((e) => e.kind === 'USAGE')).toMatchObject({ inputTokens: '10', outputTokens: '500' });
    expect((await periodOf(t, tenant.accessId)).consumed).toBe(BigInt(10 + 2 * 500));
    expect(await overBound('json')).toBe(before + 1);
  });
});
