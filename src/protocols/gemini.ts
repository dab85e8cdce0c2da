/**
 * The Gemini API (generativelanguage.googleapis.com, as `@google/genai` calls it); the key as
 * `x-goog-api-key`.
 *
 * Metered: `v1beta/models/{model}:generateContent`, `:streamGenerateContent?alt=sse`, `:embedContent`
 * and `:batchEmbedContents` (any version prefix: `v1`, `v1beta`, `v1alpha`), the model named by the path.
 * A stream asked for without `alt=sse` (a JSON array streamed) is refused with 400: the gateway meters
 * SSE. Free: `:countTokens`, and `GET {version}/models[/{model}]`. A caller sends its inference key as the
 * SDK does: `x-goog-api-key`, `?key=` or Bearer. The Live API's WebSocket (`ws/...BidiGenerateContent`) is a
 * realtime session, metered turn by turn (src/realtime/); its ephemeral tokens (`auth_tokens`, and the sessions they
 * open, `BidiGenerateContentConstrained`) are of the passthrough class `realtime_client_secrets`.
 *
 * Usage is `usageMetadata`: input `promptTokenCount` (and `toolUsePromptTokenCount`), cached
 * `cachedContentTokenCount`, output `candidatesTokenCount` plus the thinking tokens `thoughtsTokenCount`.
 * A stream's counts are running totals: the last one counts, and an event without usage keeps the last
 * seen; the stream's usage is final once an event ends a candidate (`finishReason`) or reports a blocked
 * prompt (`promptFeedback.blockReason`, a 200 metered as reported). The output cap is
 * `generationConfig.maxOutputTokens`, times `generationConfig.candidateCount`. An embedding answer
 * carries no usage: it is charged by the rule for missing usage (its input bound, no output). The
 * gateway's refusals carry Google's google.rpc `status` beside the shared Error body's fields.
 */
import { fields, FOREIGN, walkBody, type InputRule, type InputTally } from './input-estimate.js';
import { AppError } from '../errors.js';
import { bytesOf, defineProtocol, type Protocol } from './protocol.js';
import { resource } from './passthrough.js';
import { big, bigOrAbsent, type Usage } from './usage.js';
import type { AssembledAnswer, StreamCut, StreamReader, StreamState } from './stream.js';

type Json = Record<string, any>;

function geminiUsage(u: Json | null | undefined): Usage | null {
  if (!u || typeof u !== 'object' || typeof u.promptTokenCount !== 'number') return null;
  const usage: Usage = {
    inputTokens: big(u.promptTokenCount) + big(u.toolUsePromptTokenCount),
    cachedInputTokens: big(u.cachedContentTokenCount),
    outputTokens: big(u.candidatesTokenCount) + big(u.thoughtsTokenCount),
    reasoningTokens: bigOrAbsent(u.thoughtsTokenCount),
  };
  const kinds = {
    audioInputTokens: modalityTokens(u.promptTokensDetails, 'AUDIO'),
    imageInputTokens: modalityTokens(u.promptTokensDetails, 'IMAGE'),
    audioOutputTokens: modalityTokens(u.candidatesTokensDetails, 'AUDIO'),
    imageOutputTokens: modalityTokens(u.candidatesTokensDetails, 'IMAGE'),
  };
  for (const [kind, tokens] of Object.entries(kinds)) if (tokens !== null) usage[kind as keyof typeof kinds] = tokens;
  return usage;
}

/**
 * The tokens of one modality in a usageMetadata's list by modality (`promptTokensDetails`,
 * `candidatesTokensDetails`: `[{ modality: 'IMAGE', tokenCount }]`); null when the list does not name it.
 */
function modalityTokens(details: unknown, modality: 'AUDIO' | 'IMAGE'): bigint | null {
  if (!Array.isArray(details)) return null;
  let found: bigint | null = null;
  for (const entry of details as Json[]) {
    if (entry?.modality === modality) found = (found ?? 0n) + big(entry.tokenCount);
  }
  return found;
}

/** Output text of a GenerateContentResponse (text, thoughts, function call arguments), in bytes. */
function candidatesText(event: Json): number {
  if (!Array.isArray(event.candidates)) return 0;
  let n = 0;
  for (const candidate of event.candidates as Json[]) {
    const parts = candidate?.content?.parts as Json[] | undefined;
    if (!Array.isArray(parts)) continue;
    for (const part of parts) {
      if (!part || typeof part !== 'object') continue;
      n += bytesOf(part.text);
      if (part.functionCall && typeof part.functionCall === 'object') n += bytesOf(JSON.stringify(part.functionCall));
    }
  }
  return n;
}

/** Whether a GenerateContentResponse carries output that is not text (a part's `inlineData`: an image, audio). */
function candidatesData(event: Json): boolean {
  if (!Array.isArray(event.candidates)) return false;
  return (event.candidates as Json[]).some(
    (candidate) =>
      Array.isArray(candidate?.content?.parts) &&
      (candidate.content.parts as Json[]).some((part) => typeof (part?.inlineData ?? part?.inline_data) === 'object'),
  );
}

/** A streamGenerateContent SSE stream. A cut one ends with a chunk whose candidates end with MAX_TOKENS. */
class GenerateStream implements StreamReader {
  private candidates = new Set<number>();
  private modelVersion: string | undefined;

  read(event: Json, state: StreamState): void {
    if (typeof event.modelVersion === 'string') state.model = event.modelVersion;
    const usage = geminiUsage(event.usageMetadata);
    if (usage) state.usage = usage;
    const ended =
      (Array.isArray(event.candidates) && (event.candidates as Json[]).some((c) => typeof c?.finishReason === 'string')) ||
      typeof event.promptFeedback?.blockReason === 'string';
    if (ended && state.usage) state.complete = true;
  }

  text(event: Json): number {
    return candidatesText(event);
  }

  otherOutput(event: Json): boolean {
    return candidatesData(event);
  }

  /** Its candidates' text parts, and their function calls (whole in one part: their arguments as JSON). */
  assemble(event: Json, answer: AssembledAnswer): void {
    if (!Array.isArray(event.candidates)) return;
    for (const candidate of event.candidates as Json[]) {
      const parts = candidate?.content?.parts;
      if (!Array.isArray(parts)) continue;
      for (const part of parts as Json[]) {
        if (part?.thought === true) continue;
        answer.addText(part?.text);
        const call = part?.functionCall as Json | undefined;
        if (call && typeof call === 'object') answer.tool(answer.toolCalls.size, call.id, call.name, JSON.stringify(call.args ?? {}));
      }
    }
  }

  forwarded(event: Json): void {
    if (typeof event.modelVersion === 'string') this.modelVersion = event.modelVersion;
    if (!Array.isArray(event.candidates)) return;
    for (const candidate of event.candidates as Json[]) this.candidates.add(typeof candidate?.index === 'number' ? candidate.index : 0);
  }

  ending(state: StreamState, cut: StreamCut): string {
    const indices = this.candidates.size ? [...this.candidates] : [0];
    const chunk = {
      candidates: indices.map((index) => ({ content: { parts: [{ text: '' }], role: 'model' }, finishReason: 'MAX_TOKENS', index })),
      usageMetadata: {
        promptTokenCount: cut.inputTokens,
        candidatesTokenCount: cut.outputTokens,
        totalTokenCount: cut.inputTokens + cut.outputTokens,
        ...(cut.cachedTokens ? { cachedContentTokenCount: cut.cachedTokens } : {}),
      },
      modelVersion: this.modelVersion ?? state.model ?? '',
    };
    return `data: ${JSON.stringify(chunk)}\r\n\r\n`;
  }
}

const GEMINI_FIELDS = {
  input: fields('contents', 'systemInstruction', 'system_instruction', 'tools', 'toolConfig', 'tool_config', 'content', 'requests'),
  parameters: fields(
    'model',
    'generationConfig',
    'generation_config',
    'safetySettings',
    'safety_settings',
    'cachedContent',
    'taskType',
    'title',
    'outputDimensionality',
  ),
};

/**
 * The input of a Gemini request (generateContent's contents, system instruction and tools; embedContent's
 * content; batchEmbedContents' requests) into `tally`. Gemini's tokenizer is not o200k: its rule is the margin.
 * A `cachedContent` the request names is read server-side, beyond what its body carries (the overspend rule).
 */
export function geminiInput(body: Record<string, unknown>, tally: InputTally): void {
  walkBody(tally, body, GEMINI_FIELDS.input, GEMINI_FIELDS.parameters);
}

/** Gemini's tokenizer is not o200k: its count gets the margin (input-estimate.ts). */
function input(body: Record<string, unknown>, tally: InputTally): InputRule {
  geminiInput(body, tally);
  return FOREIGN;
}

const MAX_OUTPUT = ['generationConfig.maxOutputTokens'];

/** `{version}/models/{model}:{method}`: the model and the method. */
const MODEL_METHOD = /^v1(?:alpha|beta)?\/models\/([^/:]+):([A-Za-z]+)$/i;
const ALT_SSE = /[?&]alt=sse(?:&|$)/;

/** google.rpc status names, by the shared Error body's type (what Google's SDKs read as `status`). */
const GOOGLE_STATUS: Record<string, string> = {
  invalid_request_error: 'INVALID_ARGUMENT',
  authentication_error: 'UNAUTHENTICATED',
  permission_error: 'PERMISSION_DENIED',
  not_found_error: 'NOT_FOUND',
  conflict_error: 'FAILED_PRECONDITION',
  payload_too_large_error: 'INVALID_ARGUMENT',
  quota_exceeded_error: 'RESOURCE_EXHAUSTED',
  rate_limit_error: 'RESOURCE_EXHAUSTED',
  upstream_error: 'UNAVAILABLE',
  api_error: 'INTERNAL',
};

export const gemini: Protocol = defineProtocol({
  profile: 'gemini',
  title: 'Gemini',
  callerKeyHeaders: ['x-goog-api-key'],
  callerKeyQuery: 'key',
  droppedHeaders: [],
  authHeaders(out, apiKey) {
    out.push('x-goog-api-key', apiKey);
  },
  passesBack: [],
  metered: [
    [/^v1(?:alpha|beta)?\/models\/[^/:]+:generateContent$/i, 'generate'],
    [/^v1(?:alpha|beta)?\/models\/[^/:]+:streamGenerateContent$/i, 'stream_generate'],
    [/^v1(?:alpha|beta)?\/models\/[^/:]+:(?:embedContent|batchEmbedContents)$/i, 'embed'],
  ],
  endpoints: {
    generate: { label: 'generateContent', operation: 'generate_content', capFields: MAX_OUTPUT, input, stream: () => new GenerateStream() },
    stream_generate: {
      label: 'streamGenerateContent',
      operation: 'generate_content',
      capFields: MAX_OUTPUT,
      streamed: true,
      input,
      stream: () => new GenerateStream(),
    },
    embed: { label: 'embedContent', operation: 'embeddings', capFields: [], input, stream: () => new GenerateStream() },
  },
  free: [
    ['GET', /^v1(?:alpha|beta)?\/models$/i, 'models'],
    ['GET', /^v1(?:alpha|beta)?\/models\/([^/:]+)$/i, 'model'],
    ['POST', /^v1(?:alpha|beta)?\/models\/([^/:]+):countTokens$/i, 'model'],
  ],
  // Uploads (`upload/v1beta/files`) and downloads are files; a model's long-running operations are its videos' (Veo).
  passthrough: [
    [resource('files'), 'files'],
    [resource('batches'), 'batches'],
    [/(?:^|\/)models\/[^/:]+:(?:batchGenerateContent|asyncBatchEmbedContent)$/i, 'batches'],
    [resource('tunedModels'), 'fine_tuning'],
    [resource('fileSearchStores'), 'vector_stores'],
    [resource('corpora'), 'vector_stores'],
    [resource('cachedContents'), 'cached_contents'],
    // Ephemeral tokens (`v1alpha/auth_tokens`) open Live sessions straight at Google (BidiGenerateContentConstrained).
    [resource('auth_tokens'), 'realtime_client_secrets'],
    [/(?:^|\/)ws\/[^/]*\.BidiGenerateContentConstrained$/i, 'realtime_client_secrets'],
    [/(?:^|\/)models\/[^/:]+:predict$/i, 'images'],
    [/(?:^|\/)models\/[^/:]+(?::predictLongRunning$|\/operations(?:\/|$))/i, 'videos'],
  ],
  /** The model of `models/{model}:{method}`. */
  routeModel(route) {
    const model = MODEL_METHOD.exec(route)?.[1];
    return model ? model : undefined;
  },
  choiceFields: ['generationConfig.candidateCount'],
  checkRequest(endpoint, search) {
    if (endpoint === 'stream_generate' && !ALT_SSE.test(search)) {
      throw new AppError('invalid_parameter', 'streamGenerateContent is metered as server-sent events: add alt=sse to the query', {
        param: 'alt',
      });
    }
  },
  usageOf: geminiUsage,
  answerFields: { usage: 'usageMetadata', model: 'modelVersion' },
  modelList: {
    field: 'models',
    idOf: (entry) => {
      const name = (entry as { name?: unknown } | null)?.name;
      return typeof name === 'string' ? name.replace(/^models\//, '') : undefined;
    },
  },
  /** An inline part `{ inlineData: { mimeType: 'image/...', data } }` (or the REST API's snake_case). */
  inlineImage(o) {
    const mime = o.mimeType ?? o.mime_type;
    return typeof mime === 'string' && mime.startsWith('image/') && typeof o.data === 'string' ? o.data : undefined;
  },
  /**
   * Google's `{ error: { code, message, status } }`: the shared body with its google.rpc `status` beside
   * it (the SDKs take the code from the HTTP status; Nexus's stable code stays in `code`).
   */
  errorShape: { body: (shared) => ({ error: { ...shared.error, status: GOOGLE_STATUS[shared.error.type] ?? 'UNKNOWN' } }) },
  telemetry: { system: 'gcp.gemini' },
  probe: { path: 'v1beta/models' },
});
