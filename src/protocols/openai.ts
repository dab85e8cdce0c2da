/**
 * The OpenAI API and those compatible with it: chat completions, completions, embeddings and the
 * Responses API (and its compaction: openai-compact.ts), and the media endpoints (images, speech, transcription,
 * moderations: openai-media.ts); the key as
 * `Authorization: Bearer`. Each endpoint is an entry of OPENAI_SHAPE (which
 * azure-openai.ts shares): its output caps, its input walk (OPENAI_FIELDS: the fields that carry input, and
 * the parameters), its stream reader (openai-stream.ts), and for the Responses API the stored response a call continues.
 */
import { defineProtocol, isImageDataUrl, modelRoutes, type Continuation, type EndpointSpec, type Protocol } from './protocol.js';
import { ChunkStream, openAiUsage, ResponsesStream, responseIdOf } from './openai-stream.js';
import { FOREIGN, fields, O200K, walkBody, type Fields, type InputRule, type InputTally } from './input-estimate.js';
import { resource, type PassthroughClass, type PassthroughRoute } from './passthrough.js';
import { OPENAI_MEDIA, openAiMediaPaths, type OpenAiMediaEndpoint } from './openai-media.js';
import { compactEndpoint, type CompactEndpoint } from './openai-compact.js';

type Json = Record<string, any>;

/** The inline image of a chat request (`{ type: 'image_url', image_url: { url } }`) or a Responses API one (`{ type: 'input_image', image_url }`). */
function inlineImage(o: Record<string, unknown>): string | undefined {
  if (o.type === 'image_url' && o.image_url && typeof o.image_url === 'object') {
    const url = (o.image_url as Record<string, unknown>).url;
    return isImageDataUrl(url) ? url : undefined;
  }
  if (o.type === 'input_image' && isImageDataUrl(o.image_url)) return o.image_url;
  return undefined;
}

const OPENAI_COMMON = [
  'model',
  'stream',
  'stream_options',
  'temperature',
  'top_p',
  'n',
  'user',
  'metadata',
  'store',
  'service_tier',
  'seed',
  'prompt_cache_key',
  'safety_identifier',
  'parallel_tool_calls',
  'top_logprobs',
  'logprobs',
];

/** The OpenAI endpoints: their input fields and their parameters. */
const OPENAI_FIELDS: Record<OpenAiEndpoint, { input: Fields; parameters: Fields }> = {
  chat: {
    input: fields('messages', 'tools', 'functions', 'tool_choice', 'function_call', 'response_format', 'prediction'),
    parameters: fields(
      ...OPENAI_COMMON,
      'max_tokens',
      'max_completion_tokens',
      'stop',
      'presence_penalty',
      'frequency_penalty',
      'logit_bias',
      'reasoning_effort',
      'modalities',
      'audio',
      'verbosity',
      'web_search_options',
    ),
  },
  completions: {
    input: fields('prompt', 'suffix'),
    parameters: fields(...OPENAI_COMMON, 'max_tokens', 'stop', 'presence_penalty', 'frequency_penalty', 'logit_bias', 'best_of', 'echo'),
  },
  embeddings: {
    input: fields('input'),
    parameters: fields('model', 'encoding_format', 'dimensions', 'user'),
  },
  responses: {
    input: fields('input', 'instructions', 'tools', 'tool_choice', 'text'),
    parameters: fields(
      ...OPENAI_COMMON,
      'max_output_tokens',
      'previous_response_id',
      'reasoning',
      'include',
      'truncation',
      'background',
      'max_tool_calls',
    ),
  },
};

type OpenAiEndpoint = 'chat' | 'completions' | 'embeddings' | 'responses';

/** The input of an OpenAI request (chat completions, completions, embeddings, responses) into `tally`. */
function openAiInput(endpoint: OpenAiEndpoint, body: Record<string, unknown>, tally: InputTally): void {
  const { input, parameters } = OPENAI_FIELDS[endpoint];
  if (endpoint === 'completions' || endpoint === 'embeddings') {
    // A prompt or input of token ids is one token an id.
    const ids = endpoint === 'completions' ? 'prompt' : 'input';
    if (tally.tokenIds(body[ids])) return walkBody(tally, body, input, parameters, ids);
  }
  walkBody(tally, body, input, parameters);
}

/** OpenAI's own models on the o200k_base tokenizer (gpt-4o, gpt-4.1, gpt-4.5, gpt-5, o-series, ...). */
const OPENAI_O200K = /^(?:gpt-4o|gpt-4\.|gpt-5|gpt-oss|o\d|chatgpt-|codex-|computer-use|omni-)/;

/** The rule for a model named on an OpenAI connection: o200k for OpenAI's o200k models, the margin for any other. */
export function openAiRule(model: string): InputRule {
  return OPENAI_O200K.test(model) ? O200K : FOREIGN;
}

/** The Responses API's continuation: `previous_response_id` names a stored response, the answer's `id` is its own. */
const CONTINUATION: Continuation = {
  previousOf: (body) => (typeof body.previous_response_id === 'string' && body.previous_response_id ? body.previous_response_id : null),
  idOf: (answer) => responseIdOf((answer as Json | null)?.id),
};

/** An OpenAI endpoint of `kind`: its input walked by its fields, bounded by o200k for OpenAI's o200k models, else the margin. */
function walk(kind: OpenAiEndpoint) {
  return (body: Json, tally: InputTally, model: string): InputRule => {
    openAiInput(kind, body, tally);
    return openAiRule(model);
  };
}

/**
 * What every OpenAI-shaped API shares (openai, and azure-openai beside it): its endpoints (their caps, input walks,
 * streams and span names), usage, inline images and the answer's headers it passes back. Chat's two cap names are
 * both read (a server may honour either, so the larger bounds the call); the newer one is written when the request
 * has none. An Azure deployment's name is no OpenAI model's: it gets the margin (openAiRule).
 */
export const OPENAI_SHAPE = {
  endpoints: {
    chat: {
      label: 'chat/completions',
      operation: 'chat',
      capFields: ['max_completion_tokens', 'max_tokens'],
      usageAsked: true,
      input: walk('chat'),
      stream: () => new ChunkStream(true),
    },
    completions: {
      label: 'completions',
      operation: 'text_completion',
      capFields: ['max_tokens'],
      usageAsked: true,
      input: walk('completions'),
      stream: () => new ChunkStream(false),
    },
    embeddings: {
      label: 'embeddings',
      operation: 'embeddings',
      capFields: [],
      input: walk('embeddings'),
      stream: () => new ChunkStream(false),
    },
    responses: {
      label: 'responses',
      operation: 'chat',
      capFields: ['max_output_tokens'],
      continuation: CONTINUATION,
      input: walk('responses'),
      stream: () => new ResponsesStream(),
    },
    ...compactEndpoint(openAiRule, CONTINUATION),
    ...OPENAI_MEDIA,
  } satisfies Record<OpenAiEndpoint | CompactEndpoint | OpenAiMediaEndpoint, EndpointSpec>,
  usageOf: openAiUsage,
  inlineImage,
  passesBack: ['openai-processing-ms', 'openai-version', 'openai-organization'],
};

/**
 * The classes of OpenAI's unmetered paths (passthrough.ts), by the resource a path names after `prefix`: a stored
 * response's or completion's read, list, update or delete is `stored_responses` (their create is metered).
 */
export function openAiPassthrough(prefix?: string): PassthroughRoute[] {
  const resources: [string, PassthroughClass][] = [
    ['files', 'files'],
    ['uploads', 'uploads'],
    ['batches', 'batches'],
    ['fine_tuning', 'fine_tuning'],
    ['assistants', 'assistants'],
    ['threads', 'assistants'],
    ['vector_stores', 'vector_stores'],
    ['containers', 'containers'],
    ['evals', 'evals'],
    ['responses', 'stored_responses'],
    ['chat\\/completions', 'stored_responses'],
    ['conversations', 'stored_responses'],
    ['realtime', 'realtime_client_secrets'],
    ['videos', 'videos'],
  ];
  return resources.map(([name, passthroughClass]) => [resource(name, prefix), passthroughClass]);
}

export const openai: Protocol = defineProtocol({
  profile: 'openai',
  title: 'OpenAI',
  callerKeyHeaders: ['authorization'],
  // Which of the operator's OpenAI organizations and projects the connection's key bills is the
  // operator's choice (the connection), not the end user's.
  droppedHeaders: ['openai-organization', 'openai-project'],
  authHeaders(out, apiKey) {
    out.push('authorization', `Bearer ${apiKey}`);
  },
  // Case-insensitive: some upstreams route paths so (ASP.NET-hosted ones, for instance).
  metered: [
    [/(^|\/)chat\/completions$/i, 'chat'],
    [/(^|\/)completions$/i, 'completions'],
    [/(^|\/)embeddings$/i, 'embeddings'],
    [/(^|\/)responses$/i, 'responses'],
    [/(^|\/)responses\/compact$/i, 'responses_compact'],
    ...openAiMediaPaths('(?:^|\\/)'),
  ],
  free: modelRoutes(),
  // Under whatever prefix a compatible server routes them (`v1/`, or its own).
  passthrough: openAiPassthrough(),
  ...OPENAI_SHAPE,
  telemetry: { system: 'openai' },
  // baseUrl keeps /v1 out: the probe, like the SDKs, adds it.
  probe: { path: 'v1/models' },
});
