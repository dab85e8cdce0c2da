/**
 * Bedrock Runtime's Converse API: `POST model/{modelId}/converse` (a JSON answer) and
 * `model/{modelId}/converse-stream` (an `application/vnd.amazon.eventstream` answer, event-stream.ts). The
 * model is the path's (URL-encoded: ids such as `anthropic.claude-3-haiku-20240307-v1:0`, or ARNs), the
 * cap is `inferenceConfig.maxTokens`, and usage is Converse's `usage` object, in the answer or in the
 * stream's `metadata` event.
 *
 * InvokeModel and InvokeModelWithResponseStream (`invoke`, `invoke-with-response-stream`) are refused:
 * their bodies are each model family's own (where the cap is, and whether it can be bounded, differ by
 * model), so the gateway could neither bound nor clamp them. Converse reaches the same models.
 *
 * Upstream auth is the connection's (bedrock-secret.ts): a Bedrock API key as `Authorization: Bearer`, or
 * an IAM access key that signs every request with SigV4 (`@smithy/signature-v4`, service `bedrock`).
 */
import { AWS_FIELDS, bedrockAuthHeaders, bedrockPreviewSource, parseBedrockSecret, sealBedrockSecret } from './bedrock-secret.js';
import { AppError, type ErrorBody } from '../errors.js';
import { ANTHROPIC_TOOLS_TOKENS } from './anthropic.js';
import { fields, FOREIGN, walkBody, type InputRule, type InputTally } from './input-estimate.js';
import { eventFrame } from './event-stream.js';
import { bytesOf, defineProtocol, type Protocol, type SignedRequest } from './protocol.js';
import { resource } from './passthrough.js';
import { big, bigOrAbsent, type Usage } from './usage.js';
import type { AssembledAnswer, StreamCut, StreamReader, StreamState } from './stream.js';

type Json = Record<string, any>;

/** The image formats a Converse image block takes (its bytes are base64 in the JSON body). */
const IMAGE_FORMATS = new Set(['png', 'jpeg', 'gif', 'webp']);

/**
 * Converse's usage: inputTokens excludes the tokens read from and written to the prompt cache
 * (cacheReadInputTokens, cacheWriteInputTokens); Nexus counts all three as input, the read ones as cached, the
 * written ones apart too (cacheWriteTokens).
 */
export function converseUsage(u: Json | null | undefined): Usage | null {
  if (!u || typeof u !== 'object' || typeof u.inputTokens !== 'number') return null;
  const read = big(u.cacheReadInputTokens);
  return {
    inputTokens: big(u.inputTokens) + read + big(u.cacheWriteInputTokens),
    cachedInputTokens: read,
    outputTokens: big(u.outputTokens),
    cacheWriteTokens: bigOrAbsent(u.cacheWriteInputTokens),
  };
}

/** `model/{modelId}/{operation}`, decoded: the id is all between (an ARN holds slashes). */
const MODEL_IN_PATH = /^model\/(.+)\/[^/]+$/i;

/**
 * The model a Bedrock path names (its routeModel): its `{modelId}`, percent-decoded, whether an ARN's `/`
 * came encoded (%2F, as the SDK sends it) or not, so that the rules of a plan see one name for one model.
 * The gateway passes the route, already decoded (path-safety.ts); a path as sent is decoded here.
 */
export function modelInPath(providerPath: string): string | undefined {
  let path = providerPath.replace(/\/$/, '');
  try {
    path = decodeURIComponent(path);
  } catch {
    // Left as sent: the gateway's path check refuses a malformed encoding before this is read.
  }
  return MODEL_IN_PATH.exec(path)?.[1];
}

/**
 * Bedrock names a model by its ARN in one path segment, its `/` sent as %2F
 * (`model/arn%3Aaws%3Abedrock%3A...%3Ainference-profile%2Fus.anthropic...%2Fconverse`): that segment's
 * encoded slashes are read as slashes (slashesInPath), and the path so read passes every check of path-safety.ts.
 */
const MODEL_ARN_SEGMENT = /^model\/(arn(?::|%3a)[^/]*)\//i;

/** A Bedrock path with its model ARN's encoded slashes made plain; undefined when it holds none. */
function arnSlashes(providerPath: string): string | undefined {
  const arn = MODEL_ARN_SEGMENT.exec(providerPath)?.[1];
  if (!arn || !/%2f/i.test(arn)) return undefined;
  return `model/${arn.replace(/%2f/gi, '/')}${providerPath.slice('model/'.length + arn.length)}`;
}

/**
 * A ConverseStream answer, its events as the AWS SDK shapes them (`{ [eventType]: payload }`): usage in
 * `metadata`, output text in `contentBlockDelta`. A cut one ends with its open content blocks stopped,
 * `messageStop` with stopReason `max_tokens`, and `metadata` with the usage charged.
 */
class ConverseStream implements StreamReader {
  private readonly openBlocks = new Set<number>();

  read(event: Json, state: StreamState): void {
    const usage = converseUsage(event.metadata?.usage);
    if (!usage) return;
    state.usage = usage;
    state.complete = true;
  }

  text(event: Json): number {
    const d = event.contentBlockDelta?.delta as Json | undefined;
    if (!d || typeof d !== 'object') return 0;
    return bytesOf(d.text) + bytesOf(d.toolUse?.input) + bytesOf(d.reasoningContent?.text);
  }

  /** Its text deltas, and its tool uses (started with their id and name, their input by deltas). */
  assemble(event: Json, answer: AssembledAnswer): void {
    const started = event.contentBlockStart;
    if (typeof started?.contentBlockIndex === 'number' && started.start?.toolUse)
      answer.tool(started.contentBlockIndex, started.start.toolUse.toolUseId, started.start.toolUse.name, '');
    const delta = event.contentBlockDelta;
    if (typeof delta?.contentBlockIndex !== 'number' || !delta.delta) return;
    answer.addText(delta.delta.text);
    if (delta.delta.toolUse) answer.tool(delta.contentBlockIndex, undefined, undefined, delta.delta.toolUse.input);
  }

  forwarded(event: Json): void {
    const start = event.contentBlockStart?.contentBlockIndex ?? event.contentBlockDelta?.contentBlockIndex;
    if (typeof start === 'number') this.openBlocks.add(start);
    const stop = event.contentBlockStop?.contentBlockIndex;
    if (typeof stop === 'number') this.openBlocks.delete(stop);
  }

  ending(_state: StreamState, cut: StreamCut): Buffer {
    const frames = [...this.openBlocks].map((contentBlockIndex) => eventFrame('contentBlockStop', { contentBlockIndex }));
    frames.push(eventFrame('messageStop', { stopReason: 'max_tokens' }));
    const uncached = Math.max(0, cut.inputTokens - cut.cachedTokens);
    frames.push(
      eventFrame('metadata', {
        usage: {
          inputTokens: uncached,
          outputTokens: cut.outputTokens,
          totalTokens: cut.inputTokens + cut.outputTokens,
          ...(cut.cachedTokens ? { cacheReadInputTokens: cut.cachedTokens } : {}),
        },
        metrics: { latencyMs: 0 },
      }),
    );
    return Buffer.concat(frames);
  }
}

const BEDROCK_FIELDS = {
  input: fields('messages', 'system', 'toolConfig', 'promptVariables'),
  parameters: fields(
    'modelId',
    'inferenceConfig',
    'guardrailConfig',
    'additionalModelResponseFieldPaths',
    'requestMetadata',
    'performanceConfig',
    'serviceTier',
  ),
};

/** A Bedrock model served by Anthropic (`anthropic.claude-...`, a cross-region `us.anthropic...`, an ARN naming one). */
const BEDROCK_ANTHROPIC = /(?:^|[./:])anthropic\./i;

/**
 * The input of a Bedrock Converse request (messages[].content[]: text, tool uses and results, images,
 * documents; system[]; toolConfig; prompt variables) into `tally`. Inline images count at their bound,
 * other inline files (`{ bytes }` sources) byte for byte; `additionalModelRequestFields` (each model
 * family's own) counts its bytes. An Anthropic model with tools adds its tool-use system prompt. No
 * Bedrock model's tokenizer is o200k for certain: its rule is the margin (FOREIGN).
 */
export function bedrockInput(body: Record<string, unknown>, tally: InputTally, model: string): void {
  walkBody(tally, body, BEDROCK_FIELDS.input, BEDROCK_FIELDS.parameters);
  const tools = (body.toolConfig as { tools?: unknown } | null | undefined)?.tools;
  if (BEDROCK_ANTHROPIC.test(model) && Array.isArray(tools) && tools.length > 0) tally.overhead += ANTHROPIC_TOOLS_TOKENS;
}

/** Bedrock's models (Anthropic's, Meta's, Amazon's...) are not counted by o200k: the margin (input-estimate.ts). */
function input(body: Record<string, unknown>, tally: InputTally, model: string): InputRule {
  bedrockInput(body, tally, model);
  return FOREIGN;
}

const MAX_TOKENS = ['inferenceConfig.maxTokens'];

/** The headers the signature sets: any the caller sent of these are replaced. */
const SIGNED = ['authorization', 'x-amz-date', 'x-amz-security-token', 'x-amz-content-sha256'];

/**
 * The connection's auth on the upstream request, once its headers and body are final: `Authorization:
 * Bearer` for a Bedrock API key, SigV4 for an access key (bedrock-secret.ts).
 */
async function signRequest(secretText: string, request: SignedRequest): Promise<void> {
  const { headers } = request;
  let contentType: string | undefined;
  for (let i = headers.length - 2; i >= 0; i -= 2) {
    if (headers[i] === 'content-type') contentType ??= headers[i + 1];
    if (SIGNED.includes(headers[i]!)) headers.splice(i, 2);
  }
  const auth = await bedrockAuthHeaders(parseBedrockSecret(secretText), {
    method: request.method,
    url: request.url,
    contentType,
    body: request.body,
  });
  for (const name in auth) headers.push(name, auth[name]!);
}

/**
 * The exception the AWS SDK raises for one of the gateway's own refusals (`x-amzn-errortype`): those that
 * Bedrock Runtime models (@aws-sdk/client-bedrock-runtime), by the status Bedrock answers them with, and
 * by its code where one status is two causes: a 429 is a rate limit (ThrottlingException, which frees in
 * seconds) or the quota used up (ServiceQuotaExceededException, which does not before the period resets).
 * The SDK retries every 429 whatever its name (docs/sdk-retries.md); the name tells the caller which it is.
 */
export function awsErrorType(status: number, code?: string): string {
  if (status === 401 || status === 403) return 'AccessDeniedException';
  if (status === 404) return 'ResourceNotFoundException';
  if (status === 409) return 'ConflictException';
  if (code === 'quota_insufficient') return 'ServiceQuotaExceededException';
  if (status === 429) return 'ThrottlingException';
  if (status === 503 || status === 502) return 'ServiceUnavailableException';
  if (status >= 500) return 'InternalServerException';
  return 'ValidationException';
}

const INVOKE = /^model\/.+\/invoke(?:-with-response-stream)?$/i;

export const bedrock: Protocol = defineProtocol({
  profile: 'bedrock',
  title: 'Amazon Bedrock Runtime',
  // The SDK's bearer token (`token`, or AWS_BEARER_TOKEN_BEDROCK) is the inference key.
  callerKeyHeaders: ['authorization'],
  // A caller's own SigV4 headers: the connection signs the upstream request itself.
  droppedHeaders: ['x-amz-date', 'x-amz-security-token', 'x-amz-content-sha256'],
  // Every request's auth is set by signRequest: a SigV4 signature covers the final headers and body.
  authHeaders() {},
  // Bedrock's request id and error type: the AWS SDK names an upstream error by the type (ThrottlingException...).
  passesBack: ['x-amzn-requestid', 'x-amzn-errortype'],
  metered: [
    [/^model\/.+\/converse$/i, 'converse'],
    [/^model\/.+\/converse-stream$/i, 'converse-stream'],
  ],
  endpoints: {
    converse: { label: 'converse', operation: 'chat', capFields: MAX_TOKENS, input, stream: () => new ConverseStream() },
    'converse-stream': {
      label: 'converse-stream',
      operation: 'chat',
      capFields: MAX_TOKENS,
      streamed: true,
      input,
      stream: () => new ConverseStream(),
    },
  },
  // CountTokens: the model is the path's (the route is decoded: an ARN's slashes are in the group).
  free: [['POST', /^model\/(.+)\/count-tokens$/i, 'model']],
  // StartAsyncInvoke and its reads; ApplyGuardrail.
  passthrough: [
    [resource('async-invoke', '^'), 'async_invoke'],
    [/^guardrail\/[^/]+\/version\/[^/]+\/apply$/i, 'guardrails'],
  ],
  slashesInPath: arnSlashes,
  routeModel: modelInPath,
  // Converse asks for one answer: no field multiplies the cap.
  choiceFields: [],
  /**
   * InvokeModel and InvokeModelWithResponseStream: their bodies are each model family's own (where the cap
   * is, and whether it can be bounded, differ by model), so they are refused even where the workspace
   * allows unmetered calls, but for the models an endpoint module meters (index.ts: Nova Canvas). Converse
   * reaches the same models.
   */
  checkRequest(endpoint, _search, route) {
    if (endpoint === undefined && INVOKE.test(route)) {
      throw new AppError(
        'unmetered_endpoint',
        "InvokeModel of this model is not metered on a 'bedrock' connection (its body is each model's own, so its output cannot be bounded): use Converse or ConverseStream, which reach the same models",
      );
    }
  },
  usageOf: converseUsage,
  /** A Converse image block's `{ format, source: { bytes } }` (base64 in the JSON body). */
  inlineImage(o) {
    if (typeof o.format !== 'string' || !IMAGE_FORMATS.has(o.format)) return undefined;
    const source = o.source as Record<string, unknown> | undefined;
    return source && typeof source === 'object' && typeof source.bytes === 'string' ? source.bytes : undefined;
  },
  streamFraming: 'event-stream',
  signRequest,
  /**
   * The region and the API key or access key, sealed as one JSON text (bedrock-secret.ts). A Bedrock API key goes
   * upstream and could come back (an access key's secret never leaves the gateway: its id is previewed and masked).
   */
  secret: {
    fields: AWS_FIELDS,
    seal: (apiKey, given, current) => sealBedrockSecret(apiKey, given, current),
    visible: (text) => bedrockPreviewSource(parseBedrockSecret(text)),
  },
  /**
   * Bedrock Runtime has no model list: its one read-only list, the asynchronous invocations (at most one), answers
   * a JSON object to credentials it accepts, with the connection's auth (signRequest).
   */
  probe: { path: 'async-invoke?maxResults=1' },
  /**
   * AWS's restJson errors: the exception's name in `x-amzn-errortype`, its text in the body's `message`,
   * the request id in `x-amzn-requestid` (the SDK's `$metadata.requestId`); the shared Error body's
   * fields stay beside `message` (Nexus's stable code in `error.code`).
   */
  errorShape: {
    body: (shared: ErrorBody) => ({ message: shared.error.message, ...shared }),
    headers: (shared, status) => ({ 'x-amzn-errortype': awsErrorType(status, shared.error.code) }),
    requestIdHeader: 'x-amzn-requestid',
  },
  telemetry: { system: 'aws.bedrock' },
});
