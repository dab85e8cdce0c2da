/**
 * The Azure OpenAI fake upstream (test/support/fake-upstreams.ts says what it does): the key as `api-key`,
 * the classic deployment paths (`api-version` required), the v1 paths, the model lists; answered as
 * the OpenAI fake answers, with Azure's stream quirks (upstreams/openai.ts, answerOpenAiPost).
 */
import { answerOpenAiPost } from './openai.js';
import { FAKE_MODEL_IDS, json, keysOf, modelIn, serve, type FakeUpstream, type UpstreamKeys } from './server.js';

const MODELS = { object: 'list', data: FAKE_MODEL_IDS.map((id) => ({ id, object: 'model', created_at: 0, status: 'succeeded' })) };
const CLASSIC = /^\/openai\/deployments\/([^/]+)\/(chat\/completions|completions|embeddings)$/;
const V1 = /^\/openai\/v1\/(chat\/completions|responses|responses\/compact|embeddings)$/;

const azureError = (code: string, message: string) => ({ error: { code, message } });

/** Azure-style: `api-key: <key>` (a Bearer token is an Entra ID token, which this fake does not take). */
export function startAzureOpenAiUpstream(options: UpstreamKeys): Promise<FakeUpstream> {
  return serve(keysOf(options), async (req, res, raw, keys) => {
    const presented = req.headers['api-key'];
    if (typeof presented !== 'string' || !keys.has(presented) || req.headers.authorization) {
      return json(res, 401, azureError('401', 'Access denied due to invalid subscription key or wrong API endpoint.'));
    }
    const [path = '', query = ''] = (req.url ?? '').split('?');
    const apiVersion = new URLSearchParams(query).get('api-version');
    if (req.method === 'GET' && /^\/openai\/(v1\/)?models$/.test(path)) return json(res, 200, MODELS);
    if (req.method === 'GET' && /^\/openai\/(v1\/)?models\//.test(path)) {
      const id = modelIn(path.replace(/^\/openai\/(v1\/)?/, '/v1/'));
      return id ? json(res, 200, { id, object: 'model', status: 'succeeded' }) : json(res, 404, azureError('NotFound', 'model not found'));
    }
    if (req.method !== 'POST') return json(res, 404, azureError('404', `no route ${req.method} ${path}`));
    const classic = CLASSIC.exec(path);
    if (classic) {
      if (!apiVersion) return json(res, 404, azureError('404', 'Resource not found'));
      return answerOpenAiPost(req, res, raw, `/v1/${classic[2]}`, { deployment: decodeURIComponent(classic[1]!) });
    }
    const v1 = V1.exec(path);
    if (v1) return answerOpenAiPost(req, res, raw, `/v1/${v1[1]}`, { deployment: undefined });
    return json(res, 404, azureError('404', `no route POST ${path}`));
  });
}
