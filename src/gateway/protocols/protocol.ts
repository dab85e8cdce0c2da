/**
 * What a protocol module declares (one per API the gateway meters: openai.ts, anthropic.ts), and the
 * Protocol the gateway reads from it. The gateway never asks which protocol a call speaks: it reads the
 * connection's protocol from the table (index.ts) and asks it.
 *
 * A protocol declares: which paths are metered (an endpoint each, whose inspector reads the request for
 * its bounds and the answer for its usage: inspectors.ts, sse-meter.ts), which free endpoint it has
 * beyond the model list, how the connection's key goes up, how a usage object reads, where an inline
 * image is in a request body, and how a stream reads (its usage, its output text, and the end a
 * stream cut at its output bound gets). Every protocol answers a
 * refusal of the gateway's own with the shared Error body (src/http/api.ts): a protocol that needs its
 * own error shape adds it here.
 */

import type { InputRule, InputTally } from '../input-estimate.js';

/** The protocols Nexus meters: a provider connection's protocolProfile. */
export type ProtocolProfile = 'openai' | 'anthropic';

/** A metered endpoint: what its request bounds and its answer reports are read as. */
export type Endpoint = 'chat' | 'completions' | 'embeddings' | 'responses' | 'messages';

export interface Usage {
  /** All input tokens, cached ones included. */
  inputTokens: bigint;
  cachedInputTokens: bigint;
  outputTokens: bigint;
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
export type FreeEndpoint = { kind: 'models' } | { kind: 'model'; model: string } | { kind: 'count_tokens' };

type Json = Record<string, any>;

/** What a protocol module declares. */
export interface ProtocolTable {
  profile: ProtocolProfile;
  /** The metered paths (POST), each an endpoint; matched in order, case-insensitive, at the path's end. */
  metered: readonly (readonly [RegExp, Endpoint])[];
  /** Its token-counting path (POST), governed but free; null: none. */
  countTokens: RegExp | null;
  /** The connection's key, as its upstream takes it: added to undici's header list (name, value, ...). */
  authHeaders(out: string[], apiKey: string): void;
  /** A usage object of an answer (a JSON answer's `usage`, a stream event's), read; null when it is not one. */
  usageOf(u: Json | null | undefined): Usage | null;
  /** Bytes that every inline image of a request body holds: a body without them is not searched for images. */
  imageMark: Buffer;
  /** The base64 data of an inline image, when `node` of a request body is one. */
  inlineImage(node: Record<string, unknown>): string | undefined;
  /**
   * The input a request of `endpoint` carries, walked into `tally` (input-estimate.ts), and the rule that
   * bounds the count for the model it names.
   */
  estimateInput(endpoint: Endpoint, body: Record<string, unknown>, tally: InputTally, model: string): InputRule;
  /** The reader of one metered stream of `endpoint` (made per stream: it keeps what the stream's end needs). */
  streamReader(endpoint: Endpoint): StreamReader;
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
  /** The output text the event carries, in bytes. */
  text(event: Json): number;
  /** The event goes on to the client: what a cut stream's end is made of is kept. */
  forwarded(event: Json): void;
  /** The events that end a cut stream, as the protocol ends an answer that reached its cap. */
  ending(state: StreamState, cut: StreamCut): string;
}

export interface Protocol extends ProtocolTable {
  /** The inspector of a call's method and route (its path as an upstream may route it); undefined when not metered. */
  inspectorFor(method: string, route: string): Inspector | undefined;
  /** A governed but free endpoint, matched on the exact provider paths, with or without a leading `v1/`. */
  freeEndpointFor(method: string, route: string): FreeEndpoint | undefined;
}

const MODEL_LIST = /^(?:v1\/)?models$/i;
const MODEL_ONE = /^(?:v1\/)?models\/(.+)$/i;
const MODELS: FreeEndpoint = Object.freeze({ kind: 'models' });
const COUNT_TOKENS: FreeEndpoint = Object.freeze({ kind: 'count_tokens' });

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
      if (method === 'GET') {
        if (MODEL_LIST.test(route)) return MODELS;
        const one = MODEL_ONE.exec(route);
        if (one) return { kind: 'model', model: one[1]! };
      } else if (method === 'POST' && table.countTokens?.test(route)) {
        return COUNT_TOKENS;
      }
      return undefined;
    },
  };
  for (const [, endpoint] of table.metered) inspectors.set(endpoint, Object.freeze({ endpoint, protocol }));
  return protocol;
}

/** A token count an upstream reported; an absurd one is clamped so its records still fit the database's int8 columns. */
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
