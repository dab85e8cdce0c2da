/**
 * What a protocol module declares (one per API the gateway meters: openai.ts, anthropic.ts,
 * azure-openai.ts, gemini.ts, bedrock.ts), and the Protocol the gateway reads from it. The gateway never
 * asks which protocol a call speaks: it reads the connection's protocol from the table (index.ts) and asks
 * it. Everything Nexus knows of one API is in its table (ProtocolTable below, field by field):
 *
 *   - keys: where a caller may put its inference key (`callerKeyHeaders`, `callerKeyQuery`: read by
 *     client-request.ts, and never sent to any upstream whatever its protocol), which other caller
 *     headers are dropped (`droppedHeaders`), and how the connection's own key goes up (`authHeaders`);
 *   - paths: the metered ones (`metered`, an endpoint each), the governed but free ones (`free`: model
 *     lists and descriptions, token counting); every other protocol's metered and free paths are
 *     refused on this one's connections with 409 `protocol_mismatch` (index.ts); `checkRequest`
 *     refuses a request the protocol cannot meter (a Gemini stream that is not SSE, Bedrock's InvokeModel);
 *   - the model a call names: `body.model` unless `routeModel` finds it in the path (an Azure
 *     deployment, a Gemini model, a Bedrock model id or ARN);
 *   - the input estimate: `estimateInput`'s walk of the body, the inline images it finds by
 *     `inlineImage` at their token bound, and the body's bytes less those images' excess
 *     (inspectors.ts, inputBoundOf: the one place the input bound is computed); the output cap: `capFields`, the request fields (dotted paths) that cap an
 *     endpoint's output, read for the bound, written when the request has none and lowered to the
 *     plan's cap (clamp), times `choiceFields`; `streamedEndpoints`, streamed by their path;
 *     `usageAsked`: the streaming endpoints whose stream carries usage only when asked
 *     (`stream_options.include_usage`, which the gateway then adds);
 *   - usage: `usageOf` (a JSON answer's usage object, found at `answerFields`, and a stream event's)
 *     and `streamReader` (an SSE stream's events: usage, output text, the end of a stream cut at its
 *     output bound; an event-stream's too, `streamFraming`); `modelList`, where its model list names its models;
 *   - errors: `errorShape`, the body of the gateway's own refusals in the API's own shape (so that
 *     the provider's SDK shows Nexus's message and request id); none: the shared Error body;
 *   - telemetry: `telemetry.system` (the `gen_ai.system` of its spans and the `protocol` label of its
 *     metrics) and the operation name of each endpoint (its upstream span's name);
 *   - framing and signing (bedrock.ts): `streamFraming`, `event-stream` for AWS's binary event-stream
 *     (read by event-stream-meter.ts, the same StreamReader fed each event's JSON; the gateway branches on
 *     the field, never on the protocol's name); `signRequest`, an upstream auth that signs the final
 *     request (SigV4: method, URL, headers and body), called once per call after `authHeaders`;
 *     `maskedPart`, the part of a structured secret an answer could echo (a Bedrock API key; an IAM
 *     secret key never goes upstream), for the answers' mask.
 *
 * A new protocol is one module with its table, and a row in index.ts (and in the table-driven suite,
 * test/gateway/protocol-rows.ts).
 */
import type { ErrorBody } from '../errors.js';
import type { InputRule, InputTally } from './input-estimate.js';

/** The protocols Nexus meters: a provider connection's protocolProfile. */
export type ProtocolProfile = 'openai' | 'anthropic' | 'azure-openai' | 'gemini' | 'bedrock';

/** A metered endpoint: what its request bounds and its answer reports are read as. */
type Endpoint =
  | 'chat'
  | 'completions'
  | 'embeddings'
  | 'responses'
  | 'messages'
  | 'generate'
  | 'stream_generate'
  | 'embed'
  | 'converse'
  | 'converse-stream';

export interface Usage {
  /** All input tokens, cached ones and those written to the cache included. */
  inputTokens: bigint;
  cachedInputTokens: bigint;
  /** All output tokens, reasoning ones included. */
  outputTokens: bigint;
  /** Of the input, the tokens written to the provider's prompt cache; null or absent: the answer did not say. */
  cacheWriteTokens?: bigint | null;
  /** Of the output, the reasoning (thinking) tokens; null or absent: the answer did not say. */
  reasoningTokens?: bigint | null;
}

/** A metered endpoint of a protocol: made once per protocol and endpoint, shared by every call to it. */
export interface Inspector {
  readonly endpoint: Endpoint;
  readonly protocol: Protocol;
}

/**
 * A governed but free endpoint: `models` (the model list), `model` (one model's description, `model` its
 * name) or `count_tokens` (token counting: its body names the model).
 */
export type FreeEndpoint =
  | { kind: 'models' }
  | { kind: 'model'; model: string }
  /** `model`: the one its path names (the countTokens pattern's first group); absent, its body names it. */
  | { kind: 'count_tokens'; model?: string };

/**
 * A free path: its method, its pattern (matched on the whole route, case-insensitive) and its kind; a
 * `model` path's first group is the model's name (a free call about one model: its description, or
 * Gemini's token counting, whose path names the model).
 */
export type FreeRoute = readonly [method: 'GET' | 'POST', pattern: RegExp, kind: FreeEndpoint['kind']];

/**
 * How a refusal's body is shaped when the client speaks an API of its own (a gateway connection's
 * protocol: its table's errorShape); none: the shared Error body.
 */
export interface ErrorBodyShape {
  /** The body the client gets. */
  body(shared: ErrorBody): unknown;
  /** The header the protocol's SDK reads the request id from (set to Nexus's request id), if any. */
  requestIdHeader?: string;
  /** Headers the protocol's SDK reads the error from, by the refusal's status (Bedrock's `x-amzn-errortype`), if any. */
  headers?(shared: ErrorBody, status: number): Record<string, string>;
}

type Json = Record<string, any>;

/** What a protocol module declares (protocol.ts's comment says what each part is for). */
export interface ProtocolTable {
  profile: ProtocolProfile;
  /** Its name for a person: the 409 of another protocol's path names it. */
  title: string;
  /**
   * Caller headers an inference key may come in, lower case: `authorization` (as a Bearer token) or a
   * header holding the key itself. Every protocol's are dropped towards every upstream.
   */
  callerKeyHeaders: readonly string[];
  /** Other caller headers dropped towards this protocol's upstream, lower case. */
  droppedHeaders: readonly string[];
  /** A query parameter an inference key may come in (Gemini's `?key=`): never forwarded, whatever the connection. */
  callerKeyQuery?: string;
  /** The connection's key, as its upstream takes it: added to undici's header list (name, value, ...). */
  authHeaders(out: string[], apiKey: string): void;
  /** The metered paths (POST), each an endpoint; matched in order, case-insensitive. */
  metered: readonly (readonly [RegExp, Endpoint])[];
  /** The governed but free paths: model lists, a model's description, token counting. */
  free: readonly FreeRoute[];
  /**
   * The path as sent, with the encoded slashes (%2F) this protocol reads as slashes made plain (Bedrock: those of
   * a model ARN's segment); undefined when it holds none. path-safety.ts checks the path so read, and a path
   * that needed it is refused (400) on any other protocol's connection. None: every encoded slash is refused.
   */
  slashesInPath?(providerPath: string): string | undefined;
  /** The model a metered path names (an Azure deployment), which the body's `model` then does not override; none: the body's. */
  routeModel?(route: string): string | undefined;
  /**
   * The request fields that cap an endpoint's output, the one written when the request has none first; none:
   * no output (embeddings). A field may be a dotted path (`generationConfig.maxOutputTokens`).
   */
  capFields: Partial<Record<Endpoint, readonly string[]>>;
  /** The request fields asking for several answers, each up to the cap (dotted paths); default `n`, `best_of`. */
  choiceFields?: readonly string[];
  /** Endpoints whose answer is a stream whatever the body says (the path asks for it); default: `stream: true` in the body. */
  streamedEndpoints?: readonly Endpoint[];
  /**
   * Refuses (throws an AppError) a request it cannot meter, by its endpoint (undefined: a path it does not
   * meter), query string and route: such a request is never forwarded, even where the workspace allows
   * unmetered calls (a Gemini stream that is not SSE, Bedrock's InvokeModel).
   */
  checkRequest?(endpoint: Endpoint | undefined, search: string, route: string): void;
  /** Where a JSON answer holds its usage and its model; default `usage` and `model`. */
  answerFields?: { usage: string; model: string };
  /** Where a model list holds its models and how an entry names one; default `data[].id`. */
  modelList?: { field: string; idOf(entry: unknown): string | undefined };
  /** Streaming endpoints whose stream reports usage only when asked (`stream_options.include_usage`). */
  usageAsked: readonly Endpoint[];
  /** A usage object of an answer (a JSON answer's `usage`, a stream event's), read; null when it is not one. */
  usageOf(u: Json | null | undefined): Usage | null;
  /** The base64 data of an inline image, when `node` of a request body is one. */
  inlineImage(node: Record<string, unknown>): string | undefined;
  /**
   * The input a request of `endpoint` carries, walked into `tally` (input-estimate.ts), and the rule that
   * bounds the count for the model it names.
   */
  estimateInput(endpoint: Endpoint, body: Record<string, unknown>, tally: InputTally, model: string): InputRule;
  /** The reader of one metered stream of `endpoint` (made per stream: it keeps what the stream's end needs). */
  streamReader(endpoint: Endpoint): StreamReader;
  /** The gateway's refusals in the API's own error shape; none: the shared Error body. */
  errorShape?: ErrorBodyShape;
  /** Span and metric names: `system` (gen_ai.system, the metrics' protocol label), each endpoint's operation name. */
  telemetry: { system: string; operations: Partial<Record<Endpoint, string>> };
  // The fields below are what an event-stream, signed protocol (bedrock.ts) adds; absent, a protocol is as
  // the others are.
  /**
   * How its streams are framed: `sse` (text/event-stream, sse-meter.ts; the default) or `event-stream`
   * (AWS's binary application/vnd.amazon.eventstream, event-stream-meter.ts). Either way each event's JSON
   * goes to the same StreamReader.
   */
  streamFraming?: 'sse' | 'event-stream';
  /** The part of the connection's secret an answer could echo, for the answers' mask; absent: the whole secret. */
  maskedPart?(secret: string): string;
  /**
   * Signs the upstream request once its headers and body are final (SigV4: the method, URL, headers and
   * body are signed), after authHeaders; absent: authHeaders alone.
   */
  signRequest?(secret: string, request: { method: string; url: URL; body: Buffer; headers: string[] }): Promise<void>;
}

/** What a stream's meter (sse-meter.ts) knows of it: its reader fills it in as the events come. */
export interface StreamState {
  usage: Usage | null;
  model: string | null;
  /** A Responses API stream's response id. */
  responseId: string | null;
  /** The upstream's final usage report was read. */
  complete: boolean;
}

/** What the end of a cut stream reports. */
export interface StreamCut {
  /** Its output bound. */
  outputTokens: number;
  /** The input as reported so far, else its bound; the cached part of it. */
  inputTokens: number;
  cachedTokens: number;
  /** The client asked for usage in the stream (the gateway did not add it). */
  usageAsked: boolean;
}

/** A protocol's reading of one metered stream, event by event (each event's data, parsed). */
export interface StreamReader {
  /** What the event says of the usage, the model and the response id, into `state`. */
  read(event: Json, state: StreamState): void;
  /**
   * The output text the event carries, in bytes (text, reasoning, refusals, tool input): 0 for an event that
   * carries none (a stream's start, a block's start, a ping, a usage report).
   */
  text(event: Json): number;
  /**
   * Whether an event without output text carries other output (an audio or image delta): one token for a stream
   * that ends short (stream-meter.ts, outputEstimate). None: only text is output.
   */
  otherOutput?(event: Json): boolean;
  /** The event goes on to the client: what a cut stream's end is made of is kept. */
  forwarded(event: Json): void;
  /**
   * The events that end a cut stream, as the protocol ends an answer that reached its cap: SSE text, or the
   * binary frames of an event-stream protocol (streamFraming).
   */
  ending(state: StreamState, cut: StreamCut): string | Buffer;
}

export interface Protocol extends ProtocolTable {
  /** The inspector of a call's method and route (its path as an upstream may route it); undefined when not metered. */
  inspectorFor(method: string, route: string): Inspector | undefined;
  /** A governed but free endpoint of the call's method and route. */
  freeEndpointFor(method: string, route: string): FreeEndpoint | undefined;
  /** The endpoints it meters, for a person ("chat/completions, embeddings"). */
  readonly meters: string;
  /** The span name of an endpoint's upstream call. */
  operationOf(endpoint: Endpoint): string;
}

const MODELS: FreeEndpoint = Object.freeze({ kind: 'models' });
const COUNT_TOKENS: FreeEndpoint = Object.freeze({ kind: 'count_tokens' });

/** The model list and a model's description at `{prefix}models[/{model}]`, with or without `v1/` (OpenAI and Anthropic). */
export const modelRoutes = (prefix = ''): FreeRoute[] => [
  ['GET', new RegExp(`^${prefix}(?:v1\\/)?models$`, 'i'), 'models'],
  ['GET', new RegExp(`^${prefix}(?:v1\\/)?models\\/(.+)$`, 'i'), 'model'],
];

/** An endpoint as a person names it (the path it ends in). */
const ENDPOINT_PATH: Record<Endpoint, string> = {
  chat: 'chat/completions',
  completions: 'completions',
  embeddings: 'embeddings',
  responses: 'responses',
  messages: 'messages',
  generate: 'generateContent',
  stream_generate: 'streamGenerateContent',
  embed: 'embedContent',
  converse: 'converse',
  'converse-stream': 'converse-stream',
};

/** A protocol from its table: its inspectors made once. */
export function defineProtocol(table: ProtocolTable): Protocol {
  const inspectors = new Map<Endpoint, Inspector>();
  const protocol: Protocol = {
    ...table,
    inspectorFor(method, route) {
      if (method !== 'POST') return undefined;
      for (const [pattern, endpoint] of table.metered) {
        if (pattern.test(route)) return inspectors.get(endpoint);
      }
      return undefined;
    },
    freeEndpointFor(method, route) {
      for (const [m, pattern, kind] of table.free) {
        if (m !== method) continue;
        const match = pattern.exec(route);
        if (!match) continue;
        if (kind === 'models') return MODELS;
        if (kind === 'count_tokens') return COUNT_TOKENS;
        return { kind: 'model', model: match[1]! };
      }
      return undefined;
    },
    meters: [...new Set(table.metered.map(([, endpoint]) => ENDPOINT_PATH[endpoint]))].join(', '),
    operationOf: (endpoint) => table.telemetry.operations[endpoint] ?? endpoint,
  };
  for (const [, endpoint] of table.metered) inspectors.set(endpoint, Object.freeze({ endpoint, protocol }));
  return protocol;
}

/** A token count an upstream reported; an absurd one is clamped so its records still fit the database's int8 columns. */
/** A token count the answer may leave out: undefined when it does. */
export function bigOrAbsent(value: unknown): bigint | undefined {
  return typeof value === 'number' ? big(value) : undefined;
}

export function big(value: unknown): bigint {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) return 0n;
  return BigInt(Math.trunc(Math.min(value, Number.MAX_SAFE_INTEGER)));
}

/** A string's length in UTF-8 bytes (0 for anything else). */
export const bytesOf = (value: unknown): number => (typeof value === 'string' ? Buffer.byteLength(value) : 0);

/** An SSE event of `type` with its data (`type` repeated in it, as the protocols that name their events do). */
export const sseEvent = (type: string, data: Json) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;

export const isImageDataUrl = (value: unknown): value is string =>
  typeof value === 'string' && value.startsWith('data:image/') && value.includes(';base64,');
