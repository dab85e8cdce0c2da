/** Anthropic's Messages API (and its token counting, free); the key as `x-api-key`. */
import { big, bytesOf, defineProtocol, type Usage } from './protocol.js';

type Json = Record<string, any>;

/** Anthropic: input_tokens excludes cache reads and writes; cache writes count as (uncached) input. */
export function anthropicUsage(u: Json | null | undefined): Usage | null {
  if (!u || typeof u !== 'object' || typeof u.input_tokens !== 'number') return null;
  const read = big(u.cache_read_input_tokens);
  return {
    inputTokens: big(u.input_tokens) + big(u.cache_creation_input_tokens) + read,
    cachedInputTokens: read,
    outputTokens: big(u.output_tokens),
  };
}

export const anthropic = defineProtocol({
  profile: 'anthropic',
  metered: [[/(^|\/)messages$/i, 'messages']],
  countTokens: /^(?:v1\/)?messages\/count_tokens$/i,
  authHeaders(out, apiKey) {
    out.push('x-api-key', apiKey);
  },
  usageOf: anthropicUsage,
  imageMark: Buffer.from('"base64"'),
  /** An image source `{ type: 'base64', media_type: 'image/...', data }`. */
  inlineImage(o) {
    return o.type === 'base64' && typeof o.media_type === 'string' && o.media_type.startsWith('image/') && typeof o.data === 'string'
      ? o.data
      : undefined;
  },
  /** content_block_delta: text, tool input JSON, thinking. */
  streamText(event) {
    if (event.type !== 'content_block_delta' || !event.delta || typeof event.delta !== 'object') return 0;
    const d = event.delta as Json;
    return bytesOf(d.text) + bytesOf(d.partial_json) + bytesOf(d.thinking);
  },
});
