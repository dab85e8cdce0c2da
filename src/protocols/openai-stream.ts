/**
 * The OpenAI streams (openai.ts): a chat or completions stream's chunks and a Responses API stream's events, read for
 * their usage, model, response id and output text, assembled into the answer a request log keeps, and ended where
 * the gateway cuts them. And the usage objects the OpenAI APIs report.
 */
import { bytesOf } from './protocol.js';
import { big, bigOrAbsent, type Usage } from './usage.js';
import { sseEvent, type AssembledAnswer, type StreamCut, type StreamReader, type StreamState } from './stream.js';

/** Responses API output items tracked for the answer of a cut stream (output_index beyond it is not kept). */
const MAX_OUTPUT_ITEMS = 1024;

type Json = Record<string, any>;

/** A count the answer may leave out or give as 0: undefined for either. */
const someOf = (value: unknown): bigint | undefined => bigOrAbsent(value) || undefined;

/** OpenAI usage objects: chat/completions/embeddings (prompt_/completion_tokens) and responses (input_/output_tokens). */
export function openAiUsage(u: Json | null | undefined): Usage | null {
  if (!u || typeof u !== 'object') return null;
  if (typeof u.prompt_tokens === 'number') {
    return {
      inputTokens: big(u.prompt_tokens),
      cachedInputTokens: big(u.prompt_tokens_details?.cached_tokens),
      outputTokens: big(u.completion_tokens),
      reasoningTokens: bigOrAbsent(u.completion_tokens_details?.reasoning_tokens),
      // gpt-4o-audio-preview: of the input and the output, the audio tokens (0, as text models report, is none).
      audioInputTokens: someOf(u.prompt_tokens_details?.audio_tokens),
      audioOutputTokens: someOf(u.completion_tokens_details?.audio_tokens),
    };
  }
  if (typeof u.input_tokens === 'number') {
    return {
      inputTokens: big(u.input_tokens),
      cachedInputTokens: big(u.input_tokens_details?.cached_tokens),
      outputTokens: big(u.output_tokens),
      reasoningTokens: bigOrAbsent(u.output_tokens_details?.reasoning_tokens),
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

/** Whether a chat chunk carries audio output (a choice's `delta.audio.data`). */
function chatAudio(chunk: Json): boolean {
  if (!Array.isArray(chunk.choices)) return false;
  return (chunk.choices as Json[]).some((choice) => bytesOf((choice?.delta as Json | undefined)?.audio?.data) > 0);
}

/** Output text of a Responses API event (its `*.delta` events: text, reasoning, refusals, arguments), in bytes. */
function responsesText(event: Json): number {
  const type = event.type;
  return typeof type === 'string' && type.endsWith('.delta') && !type.includes('audio') ? bytesOf(event.delta) : 0;
}

/** A Responses API answer's id (what a later call names as its previous_response_id), within reason. */
export function responseIdOf(value: unknown): string | null {
  return typeof value === 'string' && value.length > 0 && value.length <= 256 ? value : null;
}

/** The usage, model and response id an event of any OpenAI stream reports (a chunk's, or a Responses API event's `response`). */
function readEvent(parsed: Json, state: StreamState): void {
  if (state.model === null && typeof parsed.model === 'string') state.model = parsed.model;
  const response = parsed.response as Json | undefined;
  if (response && typeof response === 'object') {
    if (typeof response.model === 'string') state.model = response.model;
    state.responseId = responseIdOf(response.id) ?? state.responseId;
  }
  if (!parsed.usage && !response?.usage) return;
  const usage = openAiUsage(parsed.usage ?? response?.usage);
  if (!usage) return;
  state.usage = usage;
  state.complete = true;
  if (typeof parsed.model === 'string') state.model = parsed.model;
}

/**
 * A chat or completions stream. A cut one ends with a last chunk with finish_reason "length" for each
 * choice seen, the usage chunk if the client asked for usage, then [DONE].
 */
export class ChunkStream implements StreamReader {
  /** The last chunk forwarded. */
  private lastChunk: Json | null = null;
  /** The choices seen (true: its role was sent). */
  private readonly choices = new Map<number, boolean>();

  constructor(private readonly chat: boolean) {}

  read(event: Json, state: StreamState): void {
    readEvent(event, state);
  }

  text(event: Json): number {
    return chatText(event);
  }

  otherOutput(event: Json): boolean {
    return chatAudio(event);
  }

  /** Each choice's text (a chat delta's content, a completion's text) and a chat delta's tool calls. */
  assemble(chunk: Json, answer: AssembledAnswer): void {
    if (!Array.isArray(chunk.choices)) return;
    for (const choice of chunk.choices as Json[]) {
      if (!this.chat) {
        answer.addText(choice?.text);
        continue;
      }
      const delta = choice?.delta as Json | undefined;
      if (!delta || typeof delta !== 'object') continue;
      answer.addText(delta.content);
      if (!Array.isArray(delta.tool_calls)) continue;
      for (const call of delta.tool_calls as Json[]) {
        if (typeof call?.index === 'number') answer.tool(call.index, call.id, call.function?.name, call.function?.arguments);
      }
    }
  }

  forwarded(chunk: Json): void {
    if (!Array.isArray(chunk.choices)) return;
    this.lastChunk = chunk;
    for (const choice of chunk.choices as Json[]) {
      if (typeof choice?.index !== 'number') continue;
      const roleSent = this.choices.get(choice.index) === true || !this.chat || typeof choice.delta?.role === 'string';
      this.choices.set(choice.index, roleSent);
    }
  }

  ending(state: StreamState, cut: StreamCut): string {
    const { chat } = this;
    const { inputTokens: input, cachedTokens: cached, outputTokens: output } = cut;
    const last = this.lastChunk ?? {};
    const head: Json = {
      id: last.id ?? 'cmpl-cut',
      object: last.object ?? (chat ? 'chat.completion.chunk' : 'text_completion'),
      created: last.created ?? Math.floor(Date.now() / 1000),
      model: last.model ?? state.model ?? '',
    };
    if (last.system_fingerprint !== undefined) head.system_fingerprint = last.system_fingerprint;
    const indices = this.choices.size ? [...this.choices.keys()] : [0];
    const choices = indices.map((index) =>
      chat
        ? { index, delta: this.choices.get(index) ? {} : { role: 'assistant', content: '' }, logprobs: null, finish_reason: 'length' }
        : { index, text: '', logprobs: null, finish_reason: 'length' },
    );
    // The client asked for usage (the gateway asks for it only when the client did not).
    const usage = cut.usageAsked;
    let out = `data: ${JSON.stringify({ ...head, choices, ...(usage ? { usage: null } : {}) })}\n\n`;
    if (usage) {
      const reported = {
        prompt_tokens: input,
        completion_tokens: output,
        total_tokens: input + output,
        prompt_tokens_details: { cached_tokens: cached },
      };
      out += `data: ${JSON.stringify({ ...head, choices: [], usage: reported })}\n\n`;
    }
    return out + 'data: [DONE]\n\n';
  }
}

const itemIndex = (value: unknown): number | undefined =>
  typeof value === 'number' && Number.isInteger(value) && value >= 0 && value < MAX_OUTPUT_ITEMS ? value : undefined;

/** A Responses API stream. A cut one ends with response.incomplete, reason max_output_tokens, its output items so far. */
export class ResponsesStream implements StreamReader {
  /** The response as last announced, its output items so far, the last sequence number. */
  private response: Json | null = null;
  private readonly items: Json[] = [];
  private sequence = -1;

  read(event: Json, state: StreamState): void {
    readEvent(event, state);
  }

  text(event: Json): number {
    return responsesText(event);
  }

  /** Its output text's deltas, and its function calls (announced by their item, their arguments by deltas). */
  assemble(event: Json, answer: AssembledAnswer): void {
    const at = itemIndex(event.output_index);
    if (event.type === 'response.output_text.delta') answer.addText(event.delta);
    else if (event.type === 'response.output_item.added' && at !== undefined && event.item?.type === 'function_call')
      answer.tool(at, event.item.call_id, event.item.name, event.item.arguments);
    else if (event.type === 'response.function_call_arguments.delta' && at !== undefined)
      answer.tool(at, undefined, undefined, event.delta);
  }

  /** An audio delta (`response.audio.delta`; its transcript is not output of its own). */
  otherOutput(event: Json): boolean {
    return event.type === 'response.audio.delta' || event.type === 'response.output_audio.delta';
  }

  forwarded(event: Json): void {
    if (typeof event.sequence_number === 'number') this.sequence = event.sequence_number;
    if (event.response && typeof event.response === 'object') this.response = event.response as Json;
    const at = itemIndex(event.output_index);
    if (at === undefined) return;
    const item = this.items[at];
    switch (event.type) {
      case 'response.output_item.added':
      case 'response.output_item.done':
        if (event.item && typeof event.item === 'object') this.items[at] = event.item as Json;
        break;
      case 'response.content_part.added': {
        const index = itemIndex(event.content_index);
        if (index !== undefined && Array.isArray(item?.content) && event.part && typeof event.part === 'object')
          item.content[index] = event.part;
        break;
      }
      case 'response.output_text.delta': {
        const part = Array.isArray(item?.content) ? (item.content[event.content_index] as Json | undefined) : undefined;
        if (part && typeof part.text === 'string' && typeof event.delta === 'string') part.text += event.delta;
        break;
      }
      case 'response.function_call_arguments.delta':
        if (item && typeof item.arguments === 'string' && typeof event.delta === 'string') item.arguments += event.delta;
        break;
    }
  }

  ending(state: StreamState, cut: StreamCut): string {
    const { inputTokens: input, cachedTokens: cached, outputTokens: output } = cut;
    const base = this.response ?? {
      id: state.responseId ?? 'resp_cut',
      object: 'response',
      created_at: Math.floor(Date.now() / 1000),
      model: state.model ?? '',
    };
    const response = {
      ...base,
      status: 'incomplete',
      incomplete_details: { reason: 'max_output_tokens' },
      output: this.items.filter(Boolean).map((item) => (item.status === 'in_progress' ? { ...item, status: 'incomplete' } : item)),
      usage: {
        input_tokens: input,
        input_tokens_details: { cached_tokens: cached },
        output_tokens: output,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: input + output,
      },
    };
    return sseEvent('response.incomplete', { sequence_number: this.sequence + 1, response });
  }
}
