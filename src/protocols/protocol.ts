/**
 * What a protocol module declares (one per API Nexus meters: openai.ts, anthropic.ts, azure-openai.ts,
 * gemini.ts, bedrock.ts), and the Protocol made of it once (defineProtocol), which the gateway and the domain
 * read. Neither asks which protocol a connection speaks: they read its protocol from index.ts and ask it.
 * Everything Nexus knows of one API is in its table (ProtocolTable below, field by field):
 *
 *   - keys: where a caller may put its inference key (`callerKeyHeaders`, `callerKeyQuery`: read by
 *     client-request.ts, and never sent to any upstream whatever its protocol), which other caller
 *     headers are dropped (`droppedHeaders`), how the connection's own key goes up (`authHeaders`, and
 *     `signRequest` for an auth that signs the final request), and which of the answer's headers come
 *     back to the caller (`passesBack`);
 *   - paths: the metered ones (`metered`, each naming one of its `endpoints`), the governed but free ones
 *     (`free`: model lists and descriptions, token counting); every other protocol's metered and free paths
 *     are refused on this one's connections with 409 `protocol_mismatch` (index.ts); `checkRequest`
 *     refuses a request the protocol cannot meter (a Gemini stream that is not SSE, Bedrock's InvokeModel);
 *     `passthrough` names the class of each other path (files, batches, fine-tuning...: passthrough.ts), which
 *     a workspace or a plan may let through unmetered;
 *   - endpoints (`endpoints`, an EndpointSpec each): everything one metered endpoint is read by: its
 *     output caps, its choices, whether its path streams and whether its stream must be asked for usage,
 *     its input walk, its stream reader, its usage, the stored answer it continues, its name for a person
 *     and for a span; an endpoint whose request is not such a JSON body reads it itself (`read`, and `form`
 *     for a multipart upload), with the kinds it is bounded by and what it is charged when its answer reports no
 *     usage (PreparedCall's `boundKinds` and `unreported`); which of its answers are read for usage
 *     (`answerRead`). The gateway asks these and knows no endpoint: a new endpoint, of any modality, is an entry
 *     there and a row of `metered` (docs/architecture.md, "Adding an endpoint");
 *   - the model a call names: `body.model` unless `routeModel` finds it in the path (an Azure
 *     deployment, a Gemini model, a Bedrock model id or ARN);
 *   - the input estimate: each endpoint's walk of the body (`input`), the inline images it finds by
 *     `inlineImage` at their token bound, and the body's bytes less those images' excess (inspectors.ts,
 *     inputBoundOf: the one place the input bound is computed);
 *   - usage: `usageOf` (a JSON answer's usage object, found at `answerFields`, unless the endpoint reads
 *     its own) and each endpoint's stream reader (an SSE stream's events: usage, output text, the end of a
 *     stream cut at its output bound; an event-stream's too, `streamFraming`); `modelList`, where its model
 *     list names its models;
 *   - errors: `errorShape`, the body of the gateway's own refusals in the API's own shape (so that
 *     the provider's SDK shows Nexus's message and request id); none: the shared Error body;
 *   - telemetry: `telemetry.system` (the `gen_ai.system` of its spans and the `protocol` label of its
 *     metrics) and each endpoint's operation name (its upstream span's name);
 *   - framing (bedrock.ts): `streamFraming`, `event-stream` for AWS's binary event-stream (read by
 *     event-stream-meter.ts, the same StreamReader fed each event's JSON; the gateway branches on the
 *     field, never on the protocol's name);
 *   - connections: `probe`, what the domain's test and verify of a connection GET (its model list, with
 *     the connection's auth); `secret`, a secret that is more than the key (Bedrock's region and access
 *     key: what is sealed, and what of it is previewed and masked in answers); `bodyShape`, the protocol
 *     whose request bodies it takes (a route's targets share one), `shapePrefix` the path under which it
 *     takes them, and `namesDeployments`, a route target whose models are the operator's deployments.
 *
 * A new protocol is one module with its table, and a row in index.ts (and in test/gateway/protocol-rows.ts); a new
 * endpoint of one, a module of its EndpointRows and a row there (withEndpoints; and in test/protocols/endpoints.test.ts).
 */
import type { ErrorBody } from '../errors.js';
import type { FormRead } from './request-body.js';
import type { ProtocolProfile } from './index.js';
import type { InputRule, InputTally } from './input-estimate.js';
import { passthroughClassOf, type PassthroughClass, type PassthroughRoute } from './passthrough.js';
import type { StreamReader } from './stream.js';
import type { Usage, UsageKinds } from './usage.js';

export { FORM_FILE_HEAD, type FormFile, type FormRead } from './request-body.js';

type Json = Record<string, any>;

/** What a plan says of output caps: its maxOutputTokens, and whether a request above it is clamped (else refused). */
export interface OutputCapRule {
  maxOutputTokens: number;
  clamp: boolean;
}

/** A metered call's request as read for its bounds (the gateway's prepareCall, or its endpoint's own `read`). */
export interface PreparedCall {
  requestedModel: string;
  stream: boolean;
  /** The body to send: the client's bytes, or the rewritten JSON when usage had to be asked for. */
  body: Buffer;
  inputBound: bigint;
  outputBound: bigint;
  /**
   * The most output the plan lets the call ask for: maxOutputTokens times its choices (0 for an endpoint without
   * output). A connection that does not enforce the cap it sends is admitted at it (metered-call.ts).
   */
  outputCeiling: bigint;
  /** We added stream_options.include_usage: the usage chunk is ours and is removed from the stream. */
  usageInjected: boolean;
  /**
   * The stored answer this call continues (the Responses API's `previous_response_id`: the endpoint's
   * continuation). Its conversation is input the provider adds, which the body does not show: the gateway
   * bounds it from that answer's record.
   */
  previousResponseId: string | null;
  /** The request asked for more output than maxOutputTokens and its cap was lowered (policy `clamp`). */
  outputCap: { sent: number; requested: number } | undefined;
  /**
   * The kinds beyond text tokens the call may use at most (images of a tier, milliseconds of audio, characters;
   * audio and image tokens as parts of the token bounds): admitted with the tokens. None: text tokens only.
   */
  boundKinds?: UsageKinds | undefined;
  /**
   * What the call is charged when its answer reports no usage, by its endpoint's documented rule (docs/modalities.md):
   * a dall-e call's images, a binary speech answer's characters or token bound, a text transcription's duration
   * bound; never less than the provider bills, never more than the call's bound. None: the missing-usage rule
   * (charge.ts).
   */
  unreported?: Usage | undefined;
}

/**
 * A call that continues an answer the provider stored (the Responses API's `previous_response_id`): the
 * provider adds that conversation to the call's input, so the gateway remembers each answer's id and size.
 */
export interface Continuation {
  /** The stored answer a request continues (its parsed body); null: none. */
  previousOf(body: Json): string | null;
  /** The id a JSON answer is stored by (what a later call names); null: none. */
  idOf(answer: unknown): string | null;
}

/**
 * A metered endpoint as its protocol's module declares it: what its request is bounded by, and what its
 * answer reports. The gateway reads it through the endpoint's Inspector (defineProtocol fills in the defaults).
 */
export interface EndpointSpec {
  /** Its name for a person, the path it ends in (`chat/completions`): a 409 of another protocol's path lists them. */
  label: string;
  /** The operation name of its upstream span (`gen_ai.operation.name`: `chat`, `embeddings`...). */
  operation: string;
  /**
   * The request fields that cap its output, the one written when the request has none first; none: no
   * output (embeddings). A field may be a dotted path (`generationConfig.maxOutputTokens`).
   */
  capFields: readonly string[];
  /**
   * It has output, but no request field caps it (the Responses API's compaction): with `capFields` empty, its output
   * is bounded by the plan's maxOutputTokens, which is not sent. Default: empty `capFields` means no output (embeddings).
   */
  uncappedOutput?: boolean;
  /** The request fields asking for several answers, each up to the cap (dotted paths); default the protocol's. */
  choiceFields?: readonly string[];
  /** Its answer is a stream whatever the body says (the path asks for it); default: `stream: true` in the body. */
  streamed?: boolean;
  /** Its stream reports usage only when asked (`stream_options.include_usage`, which the gateway then adds). */
  usageAsked?: boolean;
  /**
   * The input its request carries, walked into `tally` (input-estimate.ts), and the rule that bounds the count for
   * the model it names.
   */
  input(body: Json, tally: InputTally, model: string): InputRule;
  /** The reader of one of its streams (made per stream: it keeps what the stream's end needs). */
  stream(): StreamReader;
  /** A usage object of its answers, read; default the protocol's `usageOf`. */
  usageOf?(u: Json | null | undefined): Usage | null;
  /** Where its JSON answer holds its usage and its model; default the protocol's `answerFields`. */
  answerFields?: { usage: string; model: string };
  /** The stored answer a call continues, and the id its answer is stored by (the Responses API). */
  continuation?: Continuation;
  /**
   * Its request read for its bounds, when it is not a JSON body whose output is capped by `capFields` (a
   * multipart upload, an output bounded by other fields): throws the AppError that refuses it. Default: the
   * gateway's reading of a JSON body by the fields above.
   */
  read?(raw: Buffer, caps: OutputCapRule, routeModel: string | undefined): PreparedCall;
  /**
   * Its multipart request read for its bounds from its fields and its files' sizes, types and headers (the gateway
   * streams the body itself to the upstream as it came: the PreparedCall's `body` is not sent). None: a multipart
   * request is refused (400).
   */
  form?(form: FormRead, routeModel: string | undefined): PreparedCall;
  /** The usage of its whole JSON answer, where the usage object alone does not say it all (a transcription's `duration`). */
  usageOfAnswer?(answer: Json): Usage | null;
  /**
   * Whether a successful answer that is not a stream, of this Content-Type, is read whole for its usage (up to 32 MiB);
   * one that is not (speech's audio, an image's bytes) is relayed as it comes and charged by the call's `unreported`
   * rule. Default: any answer but media (`audio/`, `image/`, `video/`, `application/octet-stream`).
   */
  answerRead?(contentType: string): boolean;
}

/** A metered endpoint of a protocol as the gateway reads it: made once per protocol and endpoint, shared by every call to it. */
export interface Inspector {
  /** Its name in its protocol's table (`chat`, `messages`, `converse-stream`...). */
  readonly endpoint: string;
  readonly protocol: Protocol;
  readonly label: string;
  readonly operation: string;
  readonly capFields: readonly string[];
  readonly uncappedOutput: boolean;
  readonly choiceFields: readonly string[];
  readonly streamed: boolean;
  readonly usageAsked: boolean;
  readonly answerFields: { readonly usage: string; readonly model: string };
  readonly continuation: Continuation | undefined;
  readonly read: EndpointSpec['read'];
  readonly form: EndpointSpec['form'];
  readonly usageOfAnswer: EndpointSpec['usageOfAnswer'];
  readonly answerRead: (contentType: string) => boolean;
  readonly input: EndpointSpec['input'];
  readonly stream: EndpointSpec['stream'];
  readonly usageOf: (u: Json | null | undefined) => Usage | null;
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
 * How a refusal's body is shaped when the client speaks an API of its own (a connection's protocol: its
 * table's errorShape); none: the shared Error body.
 */
export interface ErrorBodyShape {
  /** The body the client gets. */
  body(shared: ErrorBody): unknown;
  /** The header the protocol's SDK reads the request id from (set to Nexus's request id), if any. */
  requestIdHeader?: string;
  /** Headers the protocol's SDK reads the error from, by the refusal's status (Bedrock's `x-amzn-errortype`), if any. */
  headers?(shared: ErrorBody, status: number): Record<string, string>;
}

/** The connection's key, and an upstream request's parts a signature covers. */
export interface SignedRequest {
  method: string;
  url: URL;
  body: Buffer;
  /** undici's list (name, value, ...), lower-case names. */
  headers: string[];
}

/**
 * A connection's secret when it is more than the key (bedrock.ts: the region, and an access key id beside
 * the secret key), sealed as one text; without one, the secret is the key.
 */
interface SecretFormat {
  /** The fields of a connection's create, update, test or rotate it takes beside apiKey (the contract's names). */
  fields: readonly string[];
  /**
   * The text sealed, from apiKey and `given` (the request, its fields named by `fields`); `current` opens the
   * connection's secret it replaces (what a new key keeps: the region). Throws 400 naming a field missing.
   */
  seal(apiKey: string, given: object, current: (() => string) | undefined): string;
  /** The part of the sealed text that a preview shows and an answer could echo (masked): never a signing key. */
  visible(text: string): string;
}

/** What a protocol module declares (protocol.ts's comment says what each part is for). `E`: its endpoints' names. */
export interface ProtocolTable<E extends string = string> {
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
  /**
   * The answer's headers of this API a caller needs (its request id, its processing time...), lower case,
   * beside those every answer passes back (PASSED_BACK). Its rate-limit headers are not among them: they
   * describe the operator's provider account, shared by every access (docs/rate-limits.md).
   */
  passesBack: readonly string[];
  /** The metered paths (POST), each naming its endpoint; matched in order, case-insensitive. */
  metered: readonly (readonly [RegExp, NoInfer<E>])[];
  /** The metered endpoints, by name. */
  endpoints: Record<E, EndpointSpec>;
  /** The governed but free paths: model lists, a model's description, token counting. */
  free: readonly FreeRoute[];
  /**
   * The classes of the paths it neither meters nor governs as free (passthrough.ts): the row whose pattern matches
   * earliest in the route names its class; none: `other`.
   */
  passthrough: readonly PassthroughRoute[];
  /**
   * The path as sent, with the encoded slashes (%2F) this protocol reads as slashes made plain (Bedrock: those of
   * a model ARN's segment); undefined when it holds none. path-safety.ts checks the path so read, and a path
   * that needed it is refused (400) on any other protocol's connection. None: every encoded slash is refused.
   */
  slashesInPath?(providerPath: string): string | undefined;
  /** The model a metered path names (an Azure deployment), which the body's `model` then does not override; none: the body's. */
  routeModel?(route: string): string | undefined;
  /** The request fields asking for several answers, for its endpoints that name none; default `n`, `best_of`. */
  choiceFields?: readonly string[];
  /**
   * Refuses (throws an AppError) a request it cannot meter, by its endpoint (undefined: a path it does not
   * meter), query string and route: such a request is never forwarded, even where the workspace allows
   * unmetered calls (a Gemini stream that is not SSE, Bedrock's InvokeModel).
   */
  checkRequest?(endpoint: E | undefined, search: string, route: string): void;
  /** Where a JSON answer holds its usage and its model; default `usage` and `model`. */
  answerFields?: { usage: string; model: string };
  /** Where a model list holds its models and how an entry names one; default `data[].id`. */
  modelList?: { field: string; idOf(entry: unknown): string | undefined };
  /** A usage object of an answer (a JSON answer's `usage`, a stream event's), read; null when it is not one. */
  usageOf(u: Json | null | undefined): Usage | null;
  /** The base64 data of an inline image, when `node` of a request body is one. */
  inlineImage(node: Record<string, unknown>): string | undefined;
  /** The gateway's refusals in the API's own error shape; none: the shared Error body. */
  errorShape?: ErrorBodyShape;
  /** `system`: gen_ai.system of its spans, the metrics' protocol label (each endpoint names its operation). */
  telemetry: { system: string };
  /**
   * What a connection's test and verify GET (provider-probe.ts): `path` under its baseUrl (a model list, or
   * another read that answers a JSON object to a key it accepts), with `headers` (name, value, ...) beside
   * the connection's auth (authHeaders, signRequest).
   */
  probe: { path: string; headers?: readonly string[] };
  /** Its connections' secret, when it is more than the key; none: the key itself. */
  secret?: SecretFormat;
  /**
   * The protocol whose request bodies it takes, at the paths of that API under `shapePrefix` (azure-openai:
   * openai's, under `openai/`, its v1 API): a route's targets take the same bodies. Default: its own.
   */
  bodyShape?: ProtocolProfile;
  /** Where its connections take a call of its body shape's API (azure-openai: `openai/`); default none. */
  shapePrefix?: string;
  /**
   * The models a call names on its connections are the operator's deployments (Azure): as a route's target, its
   * modelMap names the deployment of every model the route maps.
   */
  namesDeployments?: boolean;
  // The fields below are what an event-stream, signed protocol (bedrock.ts) adds; absent, a protocol is as
  // the others are.
  /**
   * How its streams are framed: `sse` (text/event-stream, sse-meter.ts; the default) or `event-stream`
   * (AWS's binary application/vnd.amazon.eventstream, event-stream-meter.ts). Either way each event's JSON
   * goes to the same StreamReader.
   */
  streamFraming?: 'sse' | 'event-stream';
  /**
   * Signs the upstream request once its headers and body are final (SigV4: the method, URL, headers and
   * body are signed), after authHeaders; absent: authHeaders alone.
   */
  signRequest?(secret: string, request: SignedRequest): Promise<void>;
}

export interface Protocol extends ProtocolTable {
  /** The inspector of a call's method and route (its path as an upstream may route it); undefined when not metered. */
  inspectorFor(method: string, route: string): Inspector | undefined;
  /** A governed but free endpoint of the call's method and route. */
  freeEndpointFor(method: string, route: string): FreeEndpoint | undefined;
  /** The passthrough class of a route it neither meters nor governs (its `passthrough` rows; none matches: `other`). */
  passthroughClassFor(route: string): PassthroughClass;
  /** The endpoints it meters, for a person ("chat/completions, embeddings"). */
  readonly meters: string;
  /** The protocol whose request bodies it takes (bodyShape; its own by default). */
  readonly bodyShape: ProtocolProfile;
  /** The answer's headers that go back to the caller: PASSED_BACK and its own (passesBack). */
  readonly passedBack: ReadonlySet<string>;
}

/**
 * The answer's headers every protocol passes back to the caller: the content's type and disposition, a request
 * id, and when to retry (Retry-After, and OpenAI's and Azure's retry-after-ms).
 */
const PASSED_BACK = ['content-type', 'content-disposition', 'x-request-id', 'retry-after', 'retry-after-ms'];
// Not frozen: every metered call iterates an endpoint's fields, and a frozen array's iteration is slower in V8
// (about 150 ns a call measured on the request's read).
const CHOICE_FIELDS: readonly string[] = ['n', 'best_of'];
const ANSWER_FIELDS = { usage: 'usage', model: 'model' };

/** An answer of media (speech's audio, an image's bytes): it has no usage to read. */
const MEDIA_ANSWER = /^\s*(?:audio|image|video)\/|^\s*application\/octet-stream/i;
const notMedia = (contentType: string): boolean => !MEDIA_ANSWER.test(contentType);

const MODELS: FreeEndpoint = Object.freeze({ kind: 'models' });
const COUNT_TOKENS: FreeEndpoint = Object.freeze({ kind: 'count_tokens' });

/** The model list and a model's description at `{prefix}models[/{model}]`, with or without `v1/` (OpenAI and Anthropic). */
export const modelRoutes = (prefix = ''): FreeRoute[] => [
  ['GET', new RegExp(`^${prefix}(?:v1\\/)?models$`, 'i'), 'models'],
  ['GET', new RegExp(`^${prefix}(?:v1\\/)?models\\/(.+)$`, 'i'), 'model'],
];

/** A protocol from its table: its inspectors made once, each endpoint's defaults filled in. */
export function defineProtocol<E extends string>(table: ProtocolTable<E>): Protocol {
  const inspectors = new Map<string, Inspector>();
  const endpoints: Record<string, EndpointSpec> = table.endpoints;
  const protocol: Protocol = {
    ...(table as ProtocolTable),
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
    passthroughClassFor: (route) => passthroughClassOf(table.passthrough, route),
    meters: [...new Set(table.metered.map(([, endpoint]) => endpoints[endpoint]!.label))].join(', '),
    bodyShape: table.bodyShape ?? table.profile,
    passedBack: new Set([...PASSED_BACK, ...table.passesBack]),
  };
  for (const name in endpoints) {
    const spec = endpoints[name]!;
    const inspector: Inspector = {
      endpoint: name,
      protocol,
      label: spec.label,
      operation: spec.operation,
      capFields: spec.capFields,
      uncappedOutput: spec.uncappedOutput ?? false,
      choiceFields: spec.choiceFields ?? table.choiceFields ?? CHOICE_FIELDS,
      streamed: spec.streamed ?? false,
      usageAsked: spec.usageAsked ?? false,
      answerFields: spec.answerFields ?? table.answerFields ?? ANSWER_FIELDS,
      continuation: spec.continuation,
      read: spec.read,
      form: spec.form,
      usageOfAnswer: spec.usageOfAnswer,
      answerRead: spec.answerRead ?? notMedia,
      input: spec.input,
      stream: spec.stream,
      usageOf: spec.usageOf ?? table.usageOf,
    };
    inspectors.set(name, Object.freeze(inspector));
  }
  return protocol;
}

/** A string's length in UTF-8 bytes (0 for anything else). */
export const bytesOf = (value: unknown): number => (typeof value === 'string' ? Buffer.byteLength(value) : 0);

export const isImageDataUrl = (value: unknown): value is string =>
  typeof value === 'string' && value.startsWith('data:image/') && value.includes(';base64,');
