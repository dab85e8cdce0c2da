/**
 * Real upstream providers on 127.0.0.1 for the tests and the scripts (bench, faults, scale): an
 * OpenAI-style server (chat completions, completions, embeddings, responses and their
 * compaction, models), an Anthropic-style one (messages, count_tokens, models), an Azure OpenAI one
 * (OpenAI's answers at Azure's deployment and v1 paths, Azure's stream quirks) and a Gemini one
 * (generateContent, streamGenerateContent, embeddings, countTokens, models), each answering JSON or
 * SSE with deterministic usage, checking the credential it receives the way the
 * real one does (openai `Authorization: Bearer`, anthropic `x-api-key` with
 * `anthropic-version`, azure `api-key`, gemini `x-goog-api-key`) against a set of keys that tests may change while it runs
 * (rotation), and recording every request it saw.
 *
 * Per-server behaviour, set on the upstream: `delayMs` (every answer waits that
 * long), `forceStatus` (every request gets that status), `forceBody` (every request
 * gets a 200 with that content type and body: not a provider).
 *
 * Per-request behaviour, chosen by request headers (the gateway forwards them):
 *   x-fake-fault: reset     the connection is destroyed after two stream events (or before a JSON body)
 *                 malformed the stream carries broken JSON events and no readable usage
 *                 hang      headers are never sent (the gateway's timeout fires first)
 *                 stall     the answer starts and never ends: a stream's first event, or a JSON body's
 *                           first bytes (whatever the route and the key)
 *                 slow      one stream event every x-fake-delay-ms (default 50) ms
 *                 status-429 / status-500  that status with an error body and rate-limit headers
 *                 redirect  302 to another path of the same server
 *                 gzip      chat completions answer gzip-compressed (JSON or SSE), whatever was asked
 *                 late      a JSON chat completion (or Anthropic message) answers after x-fake-delay-ms (default 200) ms
 *                 runaway   the output is as many words as x-fake-usage's output says (not at most 10),
 *                           whatever max_tokens asked for; streamed one word an event, every
 *                           x-fake-delay-ms (default 0) ms, or a JSON answer after x-fake-delay-ms
 *   x-fake-stall-after: n   a stream stops after its first n events (frames, on Bedrock) and never ends
 *   x-fake-usage: "input,output,cached"   the usage to report (default 10,5,0)
 *   x-fake-cache-write: n   Anthropic: n of the input reported as written to the cache (cache_creation_input_tokens)
 *   x-fake-reasoning: n     OpenAI chat: n of the output reported as reasoning (completion_tokens_details.reasoning_tokens;
 *                           a compaction's output_tokens_details.reasoning_tokens)
 *   x-fake-audio: "in,out"  OpenAI chat: of the input and the output, the audio tokens (prompt_/completion_tokens_details.audio_tokens)
 *   x-fake-response-id: a responses API answer's id (JSON-decoded, so it may hold any character)
 *
 * startFixedOpenAiUpstream (upstreams/openai.ts) is the benchmark's: one answer made at start, given to
 * every request with none of the above, so that it adds no work to the floor the gateway is measured against.
 *
 * One module a protocol: upstreams/server.ts holds what they share (the server, faults, delays, usage,
 * SSE), upstreams/openai.ts and upstreams/anthropic.ts their routes and answers; a new protocol adds its
 * module there and its start function here.
 */
import { randomBytes } from 'node:crypto';
import { SECRET_MARKER } from '../security/secret-marker.js';
import { startAnthropicUpstream } from './upstreams/anthropic.js';
import { startAzureOpenAiUpstream } from './upstreams/azure-openai.js';
import { startBedrockUpstream } from './upstreams/bedrock.js';
import { startGeminiUpstream } from './upstreams/gemini.js';
import { startOpenAiUpstream } from './upstreams/openai.js';
import type { FakeUpstream } from './upstreams/server.js';

export { SECRET_MARKER, startAnthropicUpstream, startAzureOpenAiUpstream, startBedrockUpstream, startGeminiUpstream, startOpenAiUpstream };
export { FAKE_MODEL_IDS, type FakeUpstream } from './upstreams/server.js';
export { refusedUrl } from './local-server.js';

/** A provider key marked for the run-wide secret scan. */
export function testProviderKey(label = 'key'): string {
  return `${SECRET_MARKER}-${label}-${randomBytes(12).toString('base64url')}`;
}

/** An upstream of a profile accepting these keys (the provider connection tests). */
export function startFakeUpstream(profile: 'openai' | 'anthropic' | 'azure-openai' | 'gemini', keys: string[]): Promise<FakeUpstream> {
  if (profile === 'azure-openai') return startAzureOpenAiUpstream({ apiKeys: keys });
  if (profile === 'gemini') return startGeminiUpstream({ apiKeys: keys });
  return profile === 'openai' ? startOpenAiUpstream({ apiKeys: keys }) : startAnthropicUpstream({ apiKeys: keys });
}
