/**
 * Azure OpenAI (and Azure AI Foundry's OpenAI endpoints): OpenAI's request and answer shapes at Azure's
 * paths, the key as `api-key`.
 *
 * Paths, under the connection's baseUrl (the resource's endpoint, `https://{resource}.openai.azure.com`):
 *   - classic: `openai/deployments/{deployment}/{chat/completions|completions|embeddings}?api-version=...`,
 *     where the model the call names is the deployment (its body names none); and
 *     `openai/responses?api-version=...` (and its compaction, `openai/responses/compact`: openai-compact.ts);
 *   - v1: `openai/v1/{chat/completions|responses|responses/compact|embeddings}`, the body naming the model (the
 *     deployment);
 *   - media, under either (openai-media.ts): `images/{generations|edits|variations}`, `audio/{speech|transcriptions|
 *     translations}` and `moderations`;
 *   - free: the model lists `openai/models` and `openai/v1/models`, and a model's description under them
 *     (a connection's probe reads `openai/v1/models`).
 *
 * Its request bodies are OpenAI's (bodyShape): a route may mix OpenAI and Azure targets, an Azure one called at
 * `openai/` + the OpenAI path (its v1 API) with a modelMap naming its deployments (namesDeployments).
 *
 * Azure's streams carry what OpenAI's do, and more that a meter must read past: a first chunk with empty
 * `choices` and the `prompt_filter_results`, and content-filter chunks whose choices have no `delta`
 * (openai.ts's readers count text from a delta only, and read usage from any chunk that has it).
 */
import { OPENAI_SHAPE, openAiPassthrough } from './openai.js';
import { openAiMediaPaths } from './openai-media.js';
import { defineProtocol, type Protocol } from './protocol.js';

const DEPLOYMENT = /^openai\/deployments\/([^/]+)\//i;

export const azureOpenai: Protocol = defineProtocol({
  profile: 'azure-openai',
  title: 'Azure OpenAI',
  // AzureOpenAI (the openai package) sends its key as `api-key`; the plain OpenAI client on v1, as Bearer.
  callerKeyHeaders: ['api-key'],
  droppedHeaders: ['openai-organization', 'openai-project'],
  authHeaders(out, apiKey) {
    out.push('api-key', apiKey);
  },
  metered: [
    [/^openai\/deployments\/[^/]+\/chat\/completions$/i, 'chat'],
    [/^openai\/deployments\/[^/]+\/completions$/i, 'completions'],
    [/^openai\/deployments\/[^/]+\/embeddings$/i, 'embeddings'],
    [/^openai\/(?:v1\/)?responses$/i, 'responses'],
    [/^openai\/(?:v1\/)?responses\/compact$/i, 'responses_compact'],
    [/^openai\/v1\/chat\/completions$/i, 'chat'],
    [/^openai\/v1\/embeddings$/i, 'embeddings'],
    ...openAiMediaPaths('^openai\\/(?:deployments\\/[^/]+|v1)\\/'),
  ],
  free: [
    ['GET', /^openai\/(?:v1\/)?models$/i, 'models'],
    ['GET', /^openai\/(?:v1\/)?models\/(.+)$/i, 'model'],
  ],
  // OpenAI's resources under `openai/` and `openai/v1/`, and the classic API's Realtime sessions (`openai/realtimeapi/`).
  passthrough: [...openAiPassthrough('^openai\\/(?:v1\\/)?'), [/^openai\/realtimeapi(?:\/|$)/i, 'realtime_client_secrets']],
  /** A classic path's deployment: what the call is priced and allowed by. */
  routeModel(route) {
    const deployment = DEPLOYMENT.exec(route)?.[1];
    return deployment ? deployment : undefined;
  },
  ...OPENAI_SHAPE,
  telemetry: { system: 'azure.ai.openai' },
  // The v1 model list needs no api-version.
  probe: { path: 'openai/v1/models' },
  // A route's OpenAI-shaped call reaches an Azure target at the same path under its v1 API (`openai/v1/...`), the
  // model mapped to a deployment.
  bodyShape: 'openai',
  shapePrefix: 'openai/',
  namesDeployments: true,
});
