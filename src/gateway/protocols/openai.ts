/**
 * The OpenAI API and those compatible with it: chat completions, completions, embeddings and the
 * Responses API; the key as `Authorization: Bearer`.
 */
import { big, bytesOf, defineProtocol, isImageDataUrl, type Usage } from './protocol.js';

type Json = Record<string, any>;

/** OpenAI usage objects: chat/completions/embeddings (prompt_/completion_tokens) and responses (input_/output_tokens). */
export function openAiUsage(u: Json | null | undefined): Usage | null {
  if (!u || typeof u !== 'object') return null;
  if (typeof u.prompt_tokens === 'number') {
    return {
      inputTokens: big(u.prompt_tokens),
      cachedInputTokens: big(u.prompt_tokens_details?.cached_tokens),
      outputTokens: big(u.completion_tokens),
    };
  }
  if (typeof u.input_tokens === 'number') {
    return {
      inputTokens: big(u.input_tokens),
      cachedInputTokens: big(u.input_tokens_details?.cached_tokens),
      outputTokens: big(u.output_tokens),
    };
  }
  return null;
}

/** Output text of a chat or completions chunk, in bytes. */
function chatText(chunk: Json): number {
  if (!Array.isArray(chunk.choices)) return 0;
  let n = 0;
  for (const choice of chunk.choices as Json[]) {
    if (!choice || typeof choice !== 'object') continue;
    n += bytesOf(choice.text);
    const d = choice.delta as Json | undefined;
    if (!d || typeof d !== 'object') continue;
    n += bytesOf(d.content) + bytesOf(d.reasoning_content) + bytesOf(d.reasoning) + bytesOf(d.refusal);
    if (d.function_call && typeof d.function_call === 'object') n += bytesOf(d.function_call.name) + bytesOf(d.function_call.arguments);
    if (Array.isArray(d.tool_calls)) {
      for (const call of d.tool_calls as Json[]) {
        const f = call?.function as Json | undefined;
        if (f && typeof f === 'object') n += bytesOf(f.name) + bytesOf(f.arguments);
      }
    }
  }
  return n;
}

/** Output text of a Responses API event (its `*.delta` events: text, reasoning, refusals, arguments), in bytes. */
function responsesText(event: Json): number {
  const type = event.type;
  return typeof type === 'string' && type.endsWith('.delta') && !type.includes('audio') ? bytesOf(event.delta) : 0;
}

export const openai = defineProtocol({
  profile: 'openai',
  // Case-insensitive: some upstreams route paths so (ASP.NET-hosted ones, for instance).
  metered: [
    [/(^|\/)chat\/completions$/i, 'chat'],
    [/(^|\/)completions$/i, 'completions'],
    [/(^|\/)embeddings$/i, 'embeddings'],
    [/(^|\/)responses$/i, 'responses'],
  ],
  countTokens: null,
  authHeaders(out, apiKey) {
    out.push('authorization', `Bearer ${apiKey}`);
  },
  usageOf: openAiUsage,
  imageMark: Buffer.from(';base64,'),
  /** Chat's `{ type: 'image_url', image_url: { url } }` or the Responses API's `{ type: 'input_image', image_url }`, inline. */
  inlineImage(o) {
    if (o.type === 'image_url' && o.image_url && typeof o.image_url === 'object') {
      const url = (o.image_url as Record<string, unknown>).url;
      return isImageDataUrl(url) ? url : undefined;
    }
    if (o.type === 'input_image' && isImageDataUrl(o.image_url)) return o.image_url;
    return undefined;
  },
  streamText: (event, endpoint) => (endpoint === 'responses' ? responsesText(event) : chatText(event)),
});
