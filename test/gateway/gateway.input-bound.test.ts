/**
 * Input bounds from the text a request carries (src/protocols/input-estimate.ts) through the official
 * SDKs: a long English prompt on a small plan, which its body's bytes would not let through, is admitted
 * at its estimate, and settles at exactly what the upstream reports (here the prompt's o200k count, as
 * OpenAI's o200k models count it).
 */
import { encodeChat } from 'gpt-tokenizer/encoding/o200k_base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SECRET_MARKER } from '../security/secret-marker.js';
import { englishPrompt } from '../fixtures/input-corpus.js';
import { inspectorFor, prepareCall } from '../../src/protocols/inspectors.js';
import { startAnthropicUpstream, startOpenAiUpstream, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { anthropicFor, createTenant, invocationByRequestId, openAiFor, periodOf, type Tenant } from './gateway-support.js';

let t: TestApp;
let openaiUp: FakeUpstream;
let anthropicUp: FakeUpstream;
const OPENAI_KEY = `${SECRET_MARKER}-upstream-openai-0123456789`;
const ANTHROPIC_KEY = `${SECRET_MARKER}-ant-upstream-0123456789`;

beforeAll(async () => {
  t = await startTestApp();
  openaiUp = await startOpenAiUpstream({ apiKey: OPENAI_KEY });
  anthropicUp = await startAnthropicUpstream({ apiKey: ANTHROPIC_KEY });
});
afterAll(async () => {
  await t?.close();
  await openaiUp?.close();
  await anthropicUp?.close();
});

/** Units of the default strategy (input 1.0, cached 0.5, output 2.0 per token). */
const units = (input: number, output: number) => BigInt(input + 2 * output);
/** An 8 KB English prompt: about 1,800 tokens, 8,000 bytes. */
const PROMPT = englishPrompt(8192);
const MAX_TOKENS = 50;

const invocationOf = (tenant: Tenant, requestId: string) => invocationByRequestId(t, tenant.workspaceId, requestId);

describe('a long English prompt on a small plan', () => {
  const messages = [
    { role: 'system' as const, content: 'Summarise what the user sends in one paragraph.' },
    { role: 'user' as const, content: PROMPT },
  ];
  /** What gpt-4o-mini counts: the messages in its chat template, the reply primed. */
  const actual = encodeChat(messages, 'gpt-4o').length;
  const bodyBytes = Buffer.byteLength(JSON.stringify({ model: 'gpt-4o-mini', messages, max_tokens: MAX_TOKENS }));

  it('openai: admitted at its estimate where its bytes would be refused, and settled exactly, JSON and stream', async () => {
    // Room for the call's estimate (at most 1.5 times its tokens), far from its bytes.
    const quota = units(Math.ceil(actual * 1.5), MAX_TOKENS);
    expect(units(bodyBytes, MAX_TOKENS)).toBeGreaterThan(2n * quota);
    for (const stream of [false, true]) {
      const tenant = await createTenant(t, { baseUrl: openaiUp.url, providerKey: OPENAI_KEY, quotaUnits: quota });
      const client = openAiFor(tenant, { 'x-fake-usage': `${actual},7,0` });
      const body = { model: 'gpt-4o-mini', messages, max_tokens: MAX_TOKENS };
      let requestId: string;
      if (stream) {
        const { data, response } = await client.chat.completions.create({ ...body, stream: true }).withResponse();
        for await (const _ of data) void _;
        requestId = response.headers.get('x-nexus-request-id')!;
      } else {
        const { data, response } = await client.chat.completions.create(body).withResponse();
        expect(data.usage).toMatchObject({ prompt_tokens: actual, completion_tokens: 7 });
        requestId = response.headers.get('x-nexus-request-id')!;
      }
      const inv = await invocationOf(tenant, requestId);
      const expected = units(actual, 7);
      expect(inv).toMatchObject({ status: 'SUCCEEDED', quotaUnits: String(expected) });
      expect(inv.usageEvents!.map((e) => [e.kind, e.inputTokens, e.outputTokens])).toEqual([['USAGE', String(actual), '7']]);
      expect(await periodOf(t, tenant.accessId)).toMatchObject({ reserved: 0n, consumed: expected });
    }
  });

  it('anthropic: admitted within the margin for its tokenizer, below its bytes, and settled exactly', async () => {
    const claudeMessages = [{ role: 'user' as const, content: PROMPT }];
    const system = messages[0]!.content;
    // Claude counts more tokens than o200k: the fake reports 1.3 times the o200k count.
    const reported = Math.ceil(actual * 1.3);
    const bytes = Buffer.byteLength(
      JSON.stringify({ model: 'claude-sonnet-4-5', max_tokens: MAX_TOKENS, system, messages: claudeMessages }),
    );
    // Room for twice the o200k count (the margin) and the output, not for the body's bytes.
    const quota = units(2 * actual + 100, MAX_TOKENS);
    expect(units(bytes, MAX_TOKENS)).toBeGreaterThan(quota);
    const tenant = await createTenant(t, { profile: 'anthropic', baseUrl: anthropicUp.url, providerKey: ANTHROPIC_KEY, quotaUnits: quota });
    const { data, response } = await anthropicFor(tenant, { 'x-fake-usage': `${reported},9,0` })
      .messages.create({ model: 'claude-sonnet-4-5', max_tokens: MAX_TOKENS, system, messages: claudeMessages })
      .withResponse();
    expect(data.usage.input_tokens).toBe(reported);
    const inv = await invocationOf(tenant, response.headers.get('x-nexus-request-id')!);
    const expected = units(reported, 9);
    expect(inv).toMatchObject({ status: 'SUCCEEDED', quotaUnits: String(expected) });
    expect(inv.usageEvents!.map((e) => e.kind)).toEqual(['USAGE']);
    expect(await periodOf(t, tenant.accessId)).toMatchObject({ reserved: 0n, consumed: expected });
  });

  it('an upstream counting more input than the estimate is charged as reported, the units beyond the bound an ADJUSTMENT', async () => {
    const claudeMessages = [{ role: 'user' as const, content: PROMPT }];
    const body = { model: 'claude-sonnet-4-5', max_tokens: MAX_TOKENS, messages: claudeMessages };
    const inputBound = prepareCall(inspectorFor('anthropic', 'POST', 'v1/messages')!, Buffer.from(JSON.stringify(body)), {
      maxOutputTokens: 4096,
      clamp: true,
    }).inputBound;
    // Three times the o200k count: past the margin (twice it), within the body's bytes.
    const reported = 3 * encodeChat(claudeMessages, 'gpt-4o').length;
    expect(BigInt(reported)).toBeGreaterThan(inputBound);
    const tenant = await createTenant(t, { profile: 'anthropic', baseUrl: anthropicUp.url, providerKey: ANTHROPIC_KEY });
    const { response } = await anthropicFor(tenant, { 'x-fake-usage': `${reported},9,0` })
      .messages.create(body)
      .withResponse();
    const inv = await invocationOf(tenant, response.headers.get('x-nexus-request-id')!);
    const expected = units(reported, 9);
    expect(inv).toMatchObject({ status: 'SUCCEEDED', quotaUnits: String(expected) });
    const events = inv.usageEvents!.map((e) => [e.kind, BigInt(e.units)]);
    expect(events).toEqual([
      ['USAGE', inputBound + units(0, MAX_TOKENS)],
      ['ADJUSTMENT', expected - inputBound - units(0, MAX_TOKENS)],
    ]);
    expect(await periodOf(t, tenant.accessId)).toMatchObject({ reserved: 0n, consumed: expected });
  });

  it('a prompt whose estimate does not fit is still refused 429 before the upstream is called', async () => {
    const quota = units(Math.floor(actual / 2), MAX_TOKENS);
    const tenant = await createTenant(t, { baseUrl: openaiUp.url, providerKey: OPENAI_KEY, quotaUnits: quota });
    const seen = openaiUp.requests.length;
    const refused = await openAiFor(tenant)
      .chat.completions.create({ model: 'gpt-4o-mini', messages, max_tokens: MAX_TOKENS })
      .catch((e: unknown) => e as { status: number; message: string });
    expect(refused).toMatchObject({ status: 429 });
    expect((refused as { message: string }).message).toMatch(/may need up to \d+ units/);
    expect(openaiUp.requests.length).toBe(seen);
    expect(await periodOf(t, tenant.accessId)).toMatchObject({ reserved: 0n, consumed: 0n });
  });
});
