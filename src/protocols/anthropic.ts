/** Anthropic's Messages API (and its token counting, free); the key as `x-api-key`. */
import { fields, FOREIGN, walkBody, type InputTally } from './input-estimate.js';
import { bytesOf, defineProtocol, type Protocol, modelRoutes } from './protocol.js';
import { resource } from './passthrough.js';
import { big, bigOrAbsent, type Usage } from './usage.js';
import { sseEvent, type AssembledAnswer, type StreamCut, type StreamReader, type StreamState } from './stream.js';

type Json = Record<string, any>;

/** Anthropic: input_tokens excludes cache reads and writes; cache writes count as input, and apart (cacheWriteTokens). */
function anthropicUsage(u: Json | null | undefined): Usage | null {
  if (!u || typeof u !== 'object' || typeof u.input_tokens !== 'number') return null;
  const read = big(u.cache_read_input_tokens);
  return {
    inputTokens: big(u.input_tokens) + big(u.cache_creation_input_tokens) + read,
    cachedInputTokens: read,
    outputTokens: big(u.output_tokens),
    cacheWriteTokens: bigOrAbsent(u.cache_creation_input_tokens),
  };
}

/**
 * A Messages stream: the input is reported by message_start, the output (and, from some servers, the input
 * again) by message_delta; a cut stream ends with its open content blocks stopped, then message_delta with
 * stop_reason "max_tokens" and message_stop.
 */
class MessagesStream implements StreamReader {
  /** The usage message_start reported. */
  private input: Usage | null = null;
  /** Content blocks started and not stopped. */
  private readonly openBlocks = new Set<number>();

  read(event: Json, state: StreamState): void {
    if (event.type === 'message_start') {
      this.input = anthropicUsage(event.message?.usage);
      if (typeof event.message?.model === 'string') state.model = event.message.model;
      if (this.input) state.usage = { ...this.input };
    } else if (event.type === 'message_delta' && event.usage) {
      const u = event.usage as Json;
      const base = this.input ?? { inputTokens: 0n, cachedInputTokens: 0n, outputTokens: 0n };
      const restated = typeof u.input_tokens === 'number' ? anthropicUsage(u) : null;
      state.usage = {
        inputTokens: restated ? restated.inputTokens : base.inputTokens,
        cachedInputTokens: restated ? restated.cachedInputTokens : base.cachedInputTokens,
        outputTokens: big(u.output_tokens),
        cacheWriteTokens: restated ? restated.cacheWriteTokens : base.cacheWriteTokens,
      };
      state.complete = this.input !== null || restated !== null;
    }
  }

  /** content_block_delta: text, tool input JSON, thinking. */
  text(event: Json): number {
    if (event.type !== 'content_block_delta' || !event.delta || typeof event.delta !== 'object') return 0;
    const d = event.delta as Json;
    return bytesOf(d.text) + bytesOf(d.partial_json) + bytesOf(d.thinking);
  }

  /** Its text deltas, and its tool_use blocks (started with their id and name, their input by JSON deltas). */
  assemble(event: Json, answer: AssembledAnswer): void {
    if (typeof event.index !== 'number') return;
    if (event.type === 'content_block_start' && event.content_block?.type === 'tool_use')
      answer.tool(event.index, event.content_block.id, event.content_block.name, '');
    else if (event.type === 'content_block_delta' && event.delta?.type === 'text_delta') answer.addText(event.delta.text);
    else if (event.type === 'content_block_delta' && event.delta?.type === 'input_json_delta')
      answer.tool(event.index, undefined, undefined, event.delta.partial_json);
  }

  forwarded(event: Json): void {
    if (typeof event.index !== 'number') return;
    if (event.type === 'content_block_start') this.openBlocks.add(event.index);
    else if (event.type === 'content_block_stop') this.openBlocks.delete(event.index);
  }

  ending(_state: StreamState, cut: StreamCut): string {
    let out = '';
    for (const index of this.openBlocks) out += sseEvent('content_block_stop', { index });
    out += sseEvent('message_delta', {
      delta: { stop_reason: 'max_tokens', stop_sequence: null },
      usage: { output_tokens: cut.outputTokens },
    });
    return out + sseEvent('message_stop', {});
  }
}

/** Anthropic's tool-use system prompt, added when a request carries tools (its documented counts reach 530). */
export const ANTHROPIC_TOOLS_TOKENS = 600;

const ANTHROPIC_FIELDS = {
  input: fields('system', 'messages', 'tools', 'tool_choice'),
  parameters: fields(
    'model',
    'max_tokens',
    'stream',
    'temperature',
    'top_p',
    'top_k',
    'stop_sequences',
    'metadata',
    'service_tier',
    'thinking',
  ),
};

/** The input of an Anthropic Messages request (its system prompt, messages and tools) into `tally`. */
function anthropicInput(body: Record<string, unknown>, tally: InputTally): void {
  walkBody(tally, body, ANTHROPIC_FIELDS.input, ANTHROPIC_FIELDS.parameters);
  if (Array.isArray(body.tools) && body.tools.length > 0) tally.overhead += ANTHROPIC_TOOLS_TOKENS;
}

/**
 * The error types of Anthropic's error body by the shared Error body's type: Anthropic has no conflict,
 * quota or upstream type, so those read as its nearest (a refusal of the request, a limit, a server error).
 */
const ERROR_TYPE: Record<string, string> = {
  conflict_error: 'invalid_request_error',
  payload_too_large_error: 'request_too_large',
  quota_exceeded_error: 'rate_limit_error',
  upstream_error: 'api_error',
};

export const anthropic: Protocol = defineProtocol({
  profile: 'anthropic',
  title: 'Anthropic',
  callerKeyHeaders: ['x-api-key'],
  droppedHeaders: [],
  authHeaders(out, apiKey) {
    out.push('x-api-key', apiKey);
  },
  passesBack: ['request-id', 'anthropic-organization-id'],
  metered: [[/(^|\/)messages$/i, 'messages']],
  endpoints: {
    messages: {
      label: 'messages',
      operation: 'chat',
      capFields: ['max_tokens'],
      /** Claude's tokenizer is not o200k: its count gets the margin (input-estimate.ts). */
      input(body, tally) {
        anthropicInput(body, tally);
        return FOREIGN;
      },
      stream: () => new MessagesStream(),
    },
  },
  free: [...modelRoutes(), ['POST', /^(?:v1\/)?messages\/count_tokens$/i, 'count_tokens']],
  passthrough: [
    [resource('files'), 'files'],
    [resource('messages\\/batches'), 'batches'],
  ],
  usageOf: anthropicUsage,
  /** An image source `{ type: 'base64', media_type: 'image/...', data }`. */
  inlineImage(o) {
    return o.type === 'base64' && typeof o.media_type === 'string' && o.media_type.startsWith('image/') && typeof o.data === 'string'
      ? o.data
      : undefined;
  },
  /**
   * Anthropic's `{ type: 'error', error: { type, message } }` and its `request-id` header: the SDK's
   * APIError shows the message (`apiMessage`, `type`) and `requestID`. Nexus's code, param and request
   * id stay in `error` beside them.
   */
  errorShape: {
    body: (shared) => ({ type: 'error', error: { ...shared.error, type: ERROR_TYPE[shared.error.type] ?? shared.error.type } }),
    requestIdHeader: 'request-id',
  },
  telemetry: { system: 'anthropic' },
  // baseUrl keeps /v1 out: the probe, like the SDKs, adds it; the API wants its version named.
  probe: { path: 'v1/models', headers: ['anthropic-version', '2023-06-01'] },
});
