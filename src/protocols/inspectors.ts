/**
 * Usage inspectors, one per metered endpoint of each protocol profile. Before
 * the call an inspector reads the request for the call's bounds (and may
 * ask an OpenAI-style stream for its usage); after it, it reads the usage from a
 * JSON body or, incrementally, from the SSE stream.
 *
 * Bounds: input tokens <= the estimate from the text the request carries
 * (input-estimate.ts: its o200k count with a margin for other tokenizers, plus
 * structure, and bytes for what the tokenizer cannot see), and never more than
 * the request body's size in bytes (every token of a byte-level BPE covers at
 * least one byte, and the JSON around each message is longer than the chat
 * template's per-message tokens); output tokens <= the
 * request's max tokens (times `n` choices), or the strategy's maxOutputTokens,
 * which is then set as the request's cap (the body is rewritten), so that the
 * provider should not answer beyond the bound. One that does anyway is held to
 * it: a stream is cut there (sse-meter.ts), a JSON answer is charged as reported
 * and counted (docs/reliability.md "The output bound"). A cap above
 * maxOutputTokens is lowered to it (the strategy's outputCapPolicy `clamp`) or
 * refused (`refuse`).
 *
 * Some endpoints are governed but free (freeEndpointFor): the model list, a
 * model's description and Anthropic's token counting. They are authenticated like
 * a metered call and take no quota.
 */
import { AppError } from '../errors.js';
import { jsonObjectOf } from './request-body.js';
import { type ProtocolProfile, protocolOf } from './index.js';
import { INLINE_IMAGE_TOKEN_BOUND, InputTally } from './input-estimate.js';
import type { FormRead, FreeEndpoint, Inspector, OutputCapRule, PreparedCall, ProtocolTable } from './protocol.js';
import type { Usage } from './usage.js';

export type { FreeEndpoint, Inspector, PreparedCall } from './protocol.js';
export type { Usage } from './usage.js';

/** The inspector for a call of a connection of `profile` (`route`: its path as an upstream may route it), or undefined when the endpoint is not metered. */
export function inspectorFor(profile: ProtocolProfile, method: string, route: string): Inspector | undefined {
  return protocolOf(profile).inspectorFor(method, route);
}

/** A governed but free endpoint of a connection of `profile` (protocol.ts). */
export function freeEndpointFor(profile: ProtocolProfile, method: string, route: string): FreeEndpoint | undefined {
  return protocolOf(profile).freeEndpointFor(method, route);
}

/** Where a model list holds its models and how an entry names one (protocol.ts, modelList). */
type ModelList = NonNullable<ProtocolTable['modelList']>;

const DATA_IDS: ModelList = {
  field: 'data',
  idOf: (entry) => {
    const id = (entry as { id?: unknown } | null)?.id;
    return typeof id === 'string' ? id : undefined;
  },
};

/**
 * A model list's JSON answer (`{ data: [{ id }, ...] }` by default; the protocol's modelList otherwise,
 * Gemini's `{ models: [{ name: 'models/...' }] }`) with only the models `allows` accepts; Anthropic's
 * `first_id` / `last_id` follow the models kept. Anything that is not such a list comes back as it was.
 */
export function filterModelList(text: string, allows: (model: string) => boolean, list: ModelList = DATA_IDS): string {
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(text) as Record<string, unknown>;
  } catch {
    return text;
  }
  if (!body || typeof body !== 'object' || !Array.isArray(body[list.field])) return text;
  const kept = (body[list.field] as unknown[]).filter((m) => {
    const id = list.idOf(m);
    return id !== undefined && allows(id);
  });
  body[list.field] = kept;
  if ('first_id' in body) body.first_id = kept.length ? list.idOf(kept[0]) : null;
  if ('last_id' in body) body.last_id = kept.length ? list.idOf(kept[kept.length - 1]) : null;
  return JSON.stringify(body);
}

/** More choices per call than any provider allows (OpenAI: n <= 128). */
const MAX_CHOICES = 128;

/** A request field by its dotted path (`generationConfig.maxOutputTokens`); undefined when a step is not an object. */
function fieldOf(body: Record<string, unknown>, path: string): unknown {
  if (!path.includes('.')) return body[path];
  let node: unknown = body;
  for (const step of path.split('.')) {
    if (!node || typeof node !== 'object' || Array.isArray(node)) return undefined;
    node = (node as Record<string, unknown>)[step];
  }
  return node;
}

/** Sets a request field by its dotted path, making the objects on the way (refused: a step that is not an object). */
function setField(body: Record<string, unknown>, path: string, value: number): void {
  const steps = path.split('.');
  let node = body;
  for (const step of steps.slice(0, -1)) {
    const next = node[step] ?? {};
    if (typeof next !== 'object' || Array.isArray(next)) {
      throw new AppError('invalid_parameter', `${step} must be an object`, { param: step });
    }
    node[step] = next;
    node = next as Record<string, unknown>;
  }
  node[steps.at(-1)!] = value;
}

function positiveInt(value: unknown, param: string): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) {
    throw new AppError('invalid_parameter', `${param} must be a non-negative integer`, { param });
  }
  return value;
}

/**
 * An output cap: at least 1. A 0 is refused rather than trusted: some OpenAI-compatible servers
 * read it as "no cap" (`max_completion_tokens or max_tokens`), so a bound of 0 would hold nothing.
 */
function tokenCap(value: unknown, param: string): number | undefined {
  const cap = positiveInt(value, param);
  if (cap === 0) throw new AppError('invalid_parameter', `${param} must be at least 1`, { param });
  return cap;
}

export { INLINE_IMAGE_TOKEN_BOUND };

/**
 * A call's input bound: the smaller of its bytes (inline images at their bound) and the estimate from the
 * text it carries (input-estimate.ts), so a bound is never above what the bytes alone gave.
 *
 * A byte of an image is not a token (a 1 MB photo costs a few thousand), so the bytes count each inline
 * image at most INLINE_IMAGE_TOKEN_BOUND: its excess is what the estimate's walk found (InputTally's
 * imageExcess), one walk for both. The walk reads the fields that carry input, where images go; an image
 * elsewhere in a body keeps its bytes in both, so either is still at least what the call can cost.
 */
function inputBoundOf(inspector: Inspector, raw: Buffer, body: Record<string, unknown>, model: string): number {
  const tally = new InputTally(inspector.protocol.inlineImage);
  const rule = inspector.input(body, tally, model);
  return Math.min(raw.length - tally.imageExcess, tally.bound(rule));
}

/**
 * A metered call's request read for its bounds (`routeModel`: the model its path names, an Azure
 * deployment, which the body's then does not override): a JSON body, read by its endpoint's fields (protocol.ts,
 * EndpointSpec), unless the endpoint reads its request itself (`read`).
 */
export function prepareCall(inspector: Inspector, raw: Buffer, caps: OutputCapRule, routeModel?: string): PreparedCall {
  if (inspector.read) return inspector.read(raw, caps, routeModel);
  const { maxOutputTokens } = caps;
  const body = jsonObjectOf(raw);
  const requestedModel = routeModel ?? (typeof body.model === 'string' ? body.model : '');
  if (body.stream !== undefined && body.stream !== null && typeof body.stream !== 'boolean') {
    // A lenient server may stream on "yes" or 1: the gateway would not read it as a stream.
    throw new AppError('invalid_parameter', 'stream must be true or false', { param: 'stream' });
  }
  const stream = body.stream === true || inspector.streamed;
  // The endpoint's output caps (protocol.ts, capFields): every one the request names is read, since a
  // server may honour any of them, so the largest bounds the call; without any, the first is written.
  // An endpoint with none has no output (embeddings), unless its output has no cap to send (uncappedOutput): it is
  // then bounded by the plan's maxOutputTokens alone.
  const capFields = inspector.capFields;
  const output = capFields.length > 0 || inspector.uncappedOutput;
  let perChoice: number | undefined = output ? undefined : 0;
  /** The request's output cap, as this endpoint names it (the one set when the request has none). */
  const param: string | undefined =
    capFields.reduce<string | undefined>((named, field) => {
      const cap = tokenCap(fieldOf(body, field), field);
      if (cap === undefined || (perChoice !== undefined && cap <= perChoice)) return named;
      perChoice = cap;
      return field;
    }, undefined) ?? capFields[0];
  let rewritten = false;
  let outputCap: PreparedCall['outputCap'];
  if (perChoice !== undefined && perChoice > maxOutputTokens) {
    if (!caps.clamp) throw new AppError('max_tokens_exceeded', `${param} may be at most ${maxOutputTokens} on this plan`, { param });
    // Lowered to the plan's cap (SDKs that always ask for the model's maximum still work); every cap the
    // request names above it is lowered, so whichever the provider honours holds the bound.
    for (const field of capFields) {
      const cap = fieldOf(body, field);
      if (typeof cap === 'number' && cap > maxOutputTokens) setField(body, field, maxOutputTokens);
    }
    outputCap = { sent: maxOutputTokens, requested: perChoice };
    perChoice = maxOutputTokens;
    rewritten = true;
  }
  let choices = 1;
  let which = '';
  for (const field of inspector.choiceFields) {
    const asked = positiveInt(fieldOf(body, field), field) ?? 1;
    if (asked > choices) [choices, which] = [asked, field];
  }
  if (choices > MAX_CHOICES) throw new AppError('invalid_parameter', `${which} may be at most ${MAX_CHOICES}`, { param: which });
  const outputBound = BigInt(perChoice ?? maxOutputTokens) * BigInt(choices);
  const outputCeiling = output ? BigInt(maxOutputTokens) * BigInt(choices) : 0n;

  // Without a cap of its own the provider's output would be bounded by nothing the call's bound knows:
  // the call is capped at the plan's maxOutputTokens, so the bound it was admitted with holds.
  if (perChoice === undefined && param) {
    setField(body, param, maxOutputTokens);
    rewritten = true;
  }
  let usageInjected = false;
  if (stream && inspector.usageAsked) {
    const given = body.stream_options ?? {};
    if (typeof given !== 'object' || Array.isArray(given)) {
      throw new AppError('invalid_parameter', 'stream_options must be an object', { param: 'stream_options' });
    }
    const options = given as Record<string, unknown>;
    if (options.include_usage !== true) {
      body.stream_options = { ...options, include_usage: true };
      rewritten = true;
      usageInjected = true;
    }
  }
  const sent = rewritten ? Buffer.from(JSON.stringify(body)) : raw;
  // A call that continues a stored answer (the Responses API's previous_response_id): its endpoint's continuation.
  const previousResponseId = inspector.continuation ? inspector.continuation.previousOf(body) : null;
  const inputBound = BigInt(inputBoundOf(inspector, raw, body, requestedModel));
  return { requestedModel, stream, body: sent, inputBound, outputBound, outputCeiling, usageInjected, previousResponseId, outputCap };
}

/**
 * A metered call's multipart upload read for its bounds from its form (the gateway sends the upload itself): by its
 * endpoint's `form`; an endpoint that takes none refuses it (400).
 */
export function prepareForm(inspector: Inspector, form: FormRead, routeModel?: string): PreparedCall {
  if (!inspector.form) {
    throw new AppError('invalid_request', `${inspector.label} takes a JSON body, not multipart/form-data`, { param: 'content-type' });
  }
  return inspector.form(form, routeModel);
}

/**
 * A metered call's request read for its bounds, as the gateway read its body: whole (prepareCall), or a multipart
 * upload's form (prepareForm). The endpoint's table says how; the gateway asks this alone.
 */
export function prepareRequest(inspector: Inspector, request: Buffer | FormRead, caps: OutputCapRule, routeModel?: string): PreparedCall {
  return Buffer.isBuffer(request) ? prepareCall(inspector, request, caps, routeModel) : prepareForm(inspector, request, routeModel);
}

/** Usage and model of a complete JSON answer (and, for an endpoint whose answers are stored, its id: continuation). */
export function usageFromJson(
  inspector: Inspector,
  text: string,
): { usage: Usage | null; model: string | null; responseId: string | null } {
  let body: Record<string, any>;
  try {
    body = JSON.parse(text) as Record<string, any>;
  } catch {
    return { usage: null, model: null, responseId: null };
  }
  const fields = inspector.answerFields;
  const model = typeof body?.[fields.model] === 'string' ? (body[fields.model] as string) : null;
  const responseId = inspector.continuation ? inspector.continuation.idOf(body) : null;
  const usage =
    inspector.usageOfAnswer && body && typeof body === 'object' ? inspector.usageOfAnswer(body) : inspector.usageOf(body?.[fields.usage]);
  return { usage, model, responseId };
}

const MODEL = /"model"\s*:\s*"((?:[^"\\]|\\.)*)"/;

/**
 * The `model` a body names, found without parsing it ('' when it names none, or is 64 KiB or more); a multipart
 * upload's, its `model` field.
 */
export function modelNamedIn(raw: Buffer | FormRead): string {
  if (!Buffer.isBuffer(raw)) return raw.fields.model ?? '';
  return MODEL.exec(raw.length < 65536 ? raw.toString('utf8') : '')?.[1] ?? '';
}

/** A JSON body with its top-level `model` replaced (a route target's model map); anything else as it is. */
export function withModelNamed(raw: Buffer, model: string): Buffer {
  try {
    const parsed = JSON.parse(raw.toString('utf8')) as Record<string, unknown>;
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) {
      parsed.model = model;
      return Buffer.from(JSON.stringify(parsed));
    }
  } catch {
    // Not JSON: sent as it is.
  }
  return raw;
}
