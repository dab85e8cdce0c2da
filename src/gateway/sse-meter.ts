/**
 * A metered SSE stream, read event by event on its way to the client: the usage
 * the upstream reports, its model and response id, the output it has carried so
 * far, and the call's output bound held against an upstream that ignores the cap
 * it was sent (docs/reliability.md "The output bound").
 *
 * Only whole events reach the client: the bytes after the last blank line wait for
 * the rest of their event. They go out as the upstream sent them, or, when the
 * stream is rewritten (the usage chunk was the gateway's), as the events kept.
 *
 * Output counted so far: the larger of the output tokens the upstream reported
 * (Anthropic's message_start and message_delta; servers that put usage in every
 * chunk) and an estimate from the output text the events carry (content,
 * reasoning, refusals, tool-call arguments, tool input): the larger of the number
 * of events carrying any and one token per 8 bytes of that text in UTF-8.
 * The estimate is a lower bound on purpose, so that a stream which honours its cap
 * is never cut short (a text estimate above the true count would cut every answer
 * that reaches its cap before its end: English averages 4 to 5 bytes a token).
 * Streaming servers send one token an event, so the event count is exact for them
 * whatever text a client asks for: a reply of one-byte tokens counts as many as a
 * reply of long words. A server that packs several tokens into an event is caught
 * by the byte count at about twice its bound for ordinary text.
 *
 * When an event carrying output takes the count past the bound, the stream is cut
 * before that event: the client gets the end its protocol gives an answer that
 * reached its cap (chat: a last chunk with finish_reason "length", the usage chunk
 * if it asked for usage, then [DONE]; Responses API: response.incomplete with
 * reason max_output_tokens; Anthropic: the open content blocks stopped, then
 * message_delta with stop_reason "max_tokens" and message_stop), the relay aborts
 * the upstream request, and the call is charged its output bound.
 */
import { responseIdOf, type Inspector, type PreparedCall, type Usage } from './inspectors.js';
import { anthropicUsage } from './protocols/anthropic.js';
import { openAiUsage } from './protocols/openai.js';
import { big } from './protocols/protocol.js';

/** Bytes of output text counted as one token by the estimate: about twice what a BPE token averages. */
const BYTES_PER_TOKEN = 8;
/** Responses API output items tracked for the answer of a cut stream (output_index beyond it is not kept). */
const MAX_OUTPUT_ITEMS = 1024;
const USAGE_NULL = /,\s*"usage"\s*:\s*null/;
/** Global: `push` walks a chunk's events by lastIndex. */
const EVENT_END = /\r?\n\r?\n/g;
const NEWLINE = 0x0a;
const CR = 0x0d;
const EMPTY = Buffer.alloc(0);

type Json = Record<string, any>;

/** What the meter needs of its call. */
export type StreamBounds = Pick<PreparedCall, 'usageInjected' | 'inputBound' | 'outputBound'>;

/** The data of an SSE event: its `data:` lines joined by newlines ('' when it has none). */
function dataOf(block: string): string {
  // The usual event is one data line.
  if (block.startsWith('data:') && !block.includes('\n')) return block.slice(block[5] === ' ' ? 6 : 5);
  let data = '';
  for (const line of block.split(/\r?\n/)) {
    if (line.startsWith('data:')) data += (data ? '\n' : '') + line.slice(line[5] === ' ' ? 6 : 5);
  }
  return data;
}

/** Just past the last blank line of `buf` (an event's end), or 0 when it holds none. */
function lastEventEnd(buf: Buffer): number {
  let at = buf.lastIndexOf(NEWLINE);
  while (at > 0) {
    const before = buf[at - 1];
    if (before === NEWLINE || (before === CR && at >= 2 && buf[at - 2] === NEWLINE)) return at + 1;
    at = buf.lastIndexOf(NEWLINE, at - 1);
  }
  return 0;
}

const itemIndex = (value: unknown): number | undefined =>
  typeof value === 'number' && Number.isInteger(value) && value >= 0 && value < MAX_OUTPUT_ITEMS ? value : undefined;

const sse = (type: string, data: Json) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;

export class SseMeter {
  usage: Usage | null = null;
  model: string | null = null;
  /** A Responses API stream's response id. */
  responseId: string | null = null;
  /** Whether the final usage report was seen (the stream's accounting is complete). */
  complete = false;
  /** The stream passed its output bound and was cut there (nothing more is read or forwarded). */
  cut = false;
  /** Data events seen. */
  dataEvents = 0;

  private textEvents = 0;
  private textBytes = 0;
  /** Bytes of an event not yet ended (one Buffer once a chunk held an event's end). */
  private held: Buffer[] = [];
  private anthropicInput: Usage | null = null;
  private readonly rewrite: boolean;
  // What the end of a cut stream is made of.
  /** Chat and completions: the last chunk forwarded, and the choices seen (true: its role was sent). */
  private lastChunk: Json | null = null;
  private readonly choices = new Map<number, boolean>();
  /** Responses API: the response as last announced, its output items so far, the last sequence number. */
  private response: Json | null = null;
  private readonly items: Json[] = [];
  private sequence = -1;
  /** Anthropic: content blocks started and not stopped. */
  private readonly openBlocks = new Set<number>();

  constructor(
    private readonly inspector: Inspector,
    private readonly bounds: StreamBounds,
  ) {
    this.rewrite = bounds.usageInjected;
  }

  /** Output tokens the stream carried so far, as counted for its bound (the module's comment). */
  get outputSeen(): bigint {
    const estimate = BigInt(Math.max(this.textEvents, Math.ceil(this.textBytes / BYTES_PER_TOKEN)));
    const reported = this.usage?.outputTokens ?? 0n;
    return reported > estimate ? reported : estimate;
  }

  /**
   * The output a stream that ended short is charged for, at most its bound (metered-call.ts): one token per data
   * event seen, or the output counted if more.
   */
  get outputEstimate(): bigint {
    const events = BigInt(this.dataEvents);
    const seen = this.outputSeen;
    return events > seen ? events : seen;
  }

  /** The upstream's next bytes; returns what goes to the client now (whole events, or a cut stream's end). */
  push(chunk: Buffer): Buffer | string {
    if (this.cut) return EMPTY;
    // An event's end is a newline: a chunk without one only adds to the event under way.
    if (this.held.length && chunk.indexOf(NEWLINE) < 0) {
      this.held.push(chunk);
      return EMPTY;
    }
    const buf = this.held.length ? Buffer.concat([...this.held, chunk]) : chunk;
    const end = lastEventEnd(buf);
    this.held = end < buf.length ? [end ? buf.subarray(end) : buf] : [];
    if (end === 0) return EMPTY;
    const text = buf.toString('utf8', 0, end);
    let out = '';
    let from = 0;
    EVENT_END.lastIndex = 0;
    for (let match = EVENT_END.exec(text); match; match = EVENT_END.exec(text)) {
      const kept = this.onEvent(text.slice(from, match.index));
      if (this.cut) {
        this.held = [];
        return (this.rewrite ? out : text.slice(0, from)) + this.ending();
      }
      if (this.rewrite && kept !== null) out += kept + match[0];
      from = EVENT_END.lastIndex;
    }
    return this.rewrite ? out : buf.subarray(0, end);
  }

  /** What is left at the end of the stream (an unterminated event is forwarded as it came). */
  end(): Buffer | string {
    if (this.cut || !this.held.length) return EMPTY;
    const raw = this.held.length === 1 ? this.held[0]! : Buffer.concat(this.held);
    this.held = [];
    const rest = raw.toString('utf8');
    if (!rest.trim()) return raw;
    const kept = this.onEvent(rest);
    if (this.cut) return this.ending();
    return this.rewrite ? (kept ?? '') : raw;
  }

  /** Reads one event; returns it as it should reach the client, or null to drop it. */
  private onEvent(block: string): string | null {
    const data = dataOf(block);
    if (!data || data === '[DONE]') return block;
    this.dataEvents++;
    let parsed: Json;
    try {
      parsed = JSON.parse(data) as Json;
    } catch {
      return block;
    }
    if (!parsed || typeof parsed !== 'object') return block;
    const anthropic = this.inspector.protocol.profile === 'anthropic';
    const responses = this.inspector.endpoint === 'responses';
    if (anthropic) this.readAnthropic(parsed);
    else this.readOpenAi(parsed);
    const text = this.inspector.protocol.streamText(parsed, this.inspector.endpoint);
    if (text > 0) {
      this.textEvents++;
      this.textBytes += text;
      if (this.outputSeen > this.bounds.outputBound) {
        this.cut = true;
        this.complete = false;
        return null;
      }
    }
    if (anthropic) this.noteAnthropic(parsed);
    else if (responses) this.noteResponses(parsed);
    else this.noteChat(parsed);
    if (anthropic || !this.rewrite || !('usage' in parsed)) return block;
    // Our own usage chunk (no choices): the client did not ask for it; nor for the "usage":null of the others.
    if (parsed.usage === null) return block.replace(USAGE_NULL, '');
    return Array.isArray(parsed.choices) && parsed.choices.length === 0 && this.usage ? null : block;
  }

  private readOpenAi(parsed: Json): void {
    if (this.model === null && typeof parsed.model === 'string') this.model = parsed.model;
    const response = parsed.response as Json | undefined;
    if (response && typeof response === 'object') {
      if (typeof response.model === 'string') this.model = response.model;
      this.responseId = responseIdOf(response.id) ?? this.responseId;
    }
    if (!parsed.usage && !response?.usage) return;
    const usage = openAiUsage(parsed.usage ?? response?.usage);
    if (!usage) return;
    this.usage = usage;
    this.complete = true;
    if (typeof parsed.model === 'string') this.model = parsed.model;
  }

  private readAnthropic(parsed: Json): void {
    if (parsed.type === 'message_start') {
      this.anthropicInput = anthropicUsage(parsed.message?.usage);
      if (typeof parsed.message?.model === 'string') this.model = parsed.message.model;
      if (this.anthropicInput) this.usage = { ...this.anthropicInput };
    } else if (parsed.type === 'message_delta' && parsed.usage) {
      const u = parsed.usage as Json;
      const base = this.anthropicInput ?? { inputTokens: 0n, cachedInputTokens: 0n, outputTokens: 0n };
      const restated = typeof u.input_tokens === 'number' ? anthropicUsage(u) : null;
      this.usage = {
        inputTokens: restated ? restated.inputTokens : base.inputTokens,
        cachedInputTokens: restated ? restated.cachedInputTokens : base.cachedInputTokens,
        outputTokens: big(u.output_tokens),
      };
      this.complete = this.anthropicInput !== null || restated !== null;
    }
  }

  private noteChat(chunk: Json): void {
    if (!Array.isArray(chunk.choices)) return;
    this.lastChunk = chunk;
    for (const choice of chunk.choices as Json[]) {
      if (typeof choice?.index !== 'number') continue;
      const roleSent = this.choices.get(choice.index) === true || this.inspector.endpoint !== 'chat' || typeof choice.delta?.role === 'string';
      this.choices.set(choice.index, roleSent);
    }
  }

  private noteResponses(event: Json): void {
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
        if (index !== undefined && Array.isArray(item?.content) && event.part && typeof event.part === 'object') item.content[index] = event.part;
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

  private noteAnthropic(event: Json): void {
    if (typeof event.index !== 'number') return;
    if (event.type === 'content_block_start') this.openBlocks.add(event.index);
    else if (event.type === 'content_block_stop') this.openBlocks.delete(event.index);
  }

  /** The input a cut stream reports: as the upstream reported it so far, else the call's input bound. */
  private input(): { input: number; cached: number } {
    return { input: Number(this.usage?.inputTokens ?? this.bounds.inputBound), cached: Number(this.usage?.cachedInputTokens ?? 0n) };
  }

  /** The events that end a cut stream, as its protocol ends an answer that reached its cap. */
  private ending(): string {
    const output = Number(this.bounds.outputBound);
    const { input, cached } = this.input();
    if (this.inspector.protocol.profile === 'anthropic') {
      let out = '';
      for (const index of this.openBlocks) out += sse('content_block_stop', { index });
      out += sse('message_delta', { delta: { stop_reason: 'max_tokens', stop_sequence: null }, usage: { output_tokens: output } });
      return out + sse('message_stop', {});
    }
    if (this.inspector.endpoint === 'responses') {
      const base = this.response ?? { id: this.responseId ?? 'resp_cut', object: 'response', created_at: Math.floor(Date.now() / 1000), model: this.model ?? '' };
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
      return sse('response.incomplete', { sequence_number: this.sequence + 1, response });
    }
    const chat = this.inspector.endpoint === 'chat';
    const last = this.lastChunk ?? {};
    const head: Json = {
      id: last.id ?? 'cmpl-cut',
      object: last.object ?? (chat ? 'chat.completion.chunk' : 'text_completion'),
      created: last.created ?? Math.floor(Date.now() / 1000),
      model: last.model ?? this.model ?? '',
    };
    if (last.system_fingerprint !== undefined) head.system_fingerprint = last.system_fingerprint;
    const indices = this.choices.size ? [...this.choices.keys()] : [0];
    const choices = indices.map((index) =>
      chat
        ? { index, delta: this.choices.get(index) ? {} : { role: 'assistant', content: '' }, logprobs: null, finish_reason: 'length' }
        : { index, text: '', logprobs: null, finish_reason: 'length' },
    );
    // The client asked for usage (the gateway asks for it only when the client did not).
    const usage = !this.bounds.usageInjected;
    let out = `data: ${JSON.stringify({ ...head, choices, ...(usage ? { usage: null } : {}) })}\n\n`;
    if (usage) {
      const reported = { prompt_tokens: input, completion_tokens: output, total_tokens: input + output, prompt_tokens_details: { cached_tokens: cached } };
      out += `data: ${JSON.stringify({ ...head, choices: [], usage: reported })}\n\n`;
    }
    return out + 'data: [DONE]\n\n';
  }
}
