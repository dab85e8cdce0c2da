/**
 * The Gemini API fake upstream (test/support/fake-upstreams.ts says what it does): the key as
 * `x-goog-api-key`, `{version}/models/{model}:{method}` paths, usage as `usageMetadata`.
 *
 * Beyond the shared faults and x-fake-usage: x-fake-image-tokens: n (generateContent answers an image too, its n
 * output tokens by modality in usageMetadata), x-fake-thoughts: n (thinking tokens, reported apart from
 * the candidates' and counted as output), x-fake-fault: blocked (a prompt blocked by safety: 200 with
 * promptFeedback.blockReason, no candidates). A stream's events carry running usage totals, one event
 * none, and the last the full count with finishReason; `malformed` ends it with a broken event instead.
 * An embedding answer carries no usage, as the real one.
 */
import {
  answerNumber,
  FAKE_MODEL_IDS,
  json,
  keysOf,
  serve,
  stream,
  usageOf,
  wordsOf,
  type FakeUpstream,
  type UpstreamKeys,
} from './server.js';

const modelEntry = (id: string) => ({
  name: `models/${id}`,
  displayName: id,
  supportedGenerationMethods: ['generateContent', 'countTokens'],
});
const MODEL_METHOD = /^\/(v1(?:alpha|beta)?)\/models\/([^/:]+):([A-Za-z]+)$/;
const googleError = (code: number, status: string, message: string) => ({ error: { code, message, status } });

/** Gemini-style: `x-goog-api-key: <key>` (a key in the query string is refused: the gateway must not forward one). */
export function startGeminiUpstream(options: UpstreamKeys): Promise<FakeUpstream> {
  return serve(keysOf(options), async (req, res, raw, keys) => {
    const [path = '', query = ''] = (req.url ?? '').split('?');
    const params = new URLSearchParams(query);
    const presented = req.headers['x-goog-api-key'];
    if (typeof presented !== 'string' || !keys.has(presented) || req.headers.authorization || params.has('key')) {
      return json(res, 400, googleError(400, 'INVALID_ARGUMENT', 'API key not valid. Please pass a valid API key.'));
    }
    if (req.method === 'GET' && /^\/v1(alpha|beta)?\/models$/.test(path)) return json(res, 200, { models: FAKE_MODEL_IDS.map(modelEntry) });
    if (req.method === 'GET' && /^\/v1(alpha|beta)?\/models\/[^/:]+$/.test(path)) {
      const id = decodeURIComponent(path.split('/').at(-1)!);
      return FAKE_MODEL_IDS.includes(id)
        ? json(res, 200, modelEntry(id))
        : json(res, 404, googleError(404, 'NOT_FOUND', 'model not found'));
    }
    const call = MODEL_METHOD.exec(path);
    if (req.method !== 'POST' || !call) return json(res, 404, googleError(404, 'NOT_FOUND', `no route ${req.method} ${path}`));
    const [, , model, method] = call;
    const modelVersion = `${model}-001`;
    if (method === 'countTokens') return json(res, 200, { totalTokens: Math.ceil(Buffer.byteLength(raw) / 10) });
    if (method === 'embedContent') return json(res, 200, { embedding: { values: [0.1, 0.2, 0.3] } });
    if (method === 'batchEmbedContents') {
      const requests = ((JSON.parse(raw) as { requests?: unknown[] }).requests ?? []).length;
      return json(res, 200, { embeddings: Array.from({ length: requests }, () => ({ values: [0.1, 0.2, 0.3] })) });
    }
    const u = usageOf(req);
    const thoughts = Number(req.headers['x-fake-thoughts'] ?? 0);
    const words = wordsOf(req, u.output);
    const usage = (output: number) => ({
      promptTokenCount: u.input,
      candidatesTokenCount: output,
      ...(thoughts ? { thoughtsTokenCount: thoughts } : {}),
      ...(u.cached ? { cachedContentTokenCount: u.cached } : {}),
      totalTokenCount: u.input + output + thoughts,
    });
    const responseId = `resp-${answerNumber()}`;
    const candidate = (text: string, finishReason?: string) => ({
      content: { parts: [{ text }], role: 'model' },
      ...(finishReason ? { finishReason } : {}),
      index: 0,
    });
    if (req.headers['x-fake-fault'] === 'blocked') {
      return json(res, 200, { promptFeedback: { blockReason: 'SAFETY' }, usageMetadata: usage(0), modelVersion, responseId });
    }
    if (method === 'generateContent') {
      // x-fake-image-tokens: n: the answer carries an image too, n output tokens of it (as gemini-2.5-flash-image answers).
      const imageTokens = Number(req.headers['x-fake-image-tokens'] ?? 0);
      if (imageTokens) {
        const image = { inlineData: { mimeType: 'image/png', data: Buffer.from('\x89PNG fake').toString('base64') } };
        const answer = candidate(words.join(' '), 'STOP');
        answer.content.parts.push(image as unknown as { text: string });
        const usageMetadata = {
          ...usage(u.output + imageTokens),
          promptTokensDetails: [{ modality: 'TEXT', tokenCount: u.input }],
          candidatesTokensDetails: [
            { modality: 'TEXT', tokenCount: u.output },
            { modality: 'IMAGE', tokenCount: imageTokens },
          ],
        };
        return json(res, 200, { candidates: [answer], usageMetadata, modelVersion, responseId });
      }
      return json(res, 200, { candidates: [candidate(words.join(' '), 'STOP')], usageMetadata: usage(u.output), modelVersion, responseId });
    }
    if (method !== 'streamGenerateContent') return json(res, 404, googleError(404, 'NOT_FOUND', `no method ${method}`));
    const chunks = words.map((w, i) => ({
      candidates: [candidate((i ? ' ' : '') + w)],
      // Running totals; the second event carries none (the last seen stands).
      ...(i === 1 ? {} : { usageMetadata: usage(i + 1) }),
      modelVersion,
      responseId,
    }));
    const malformed = req.headers['x-fake-fault'] === 'malformed';
    const last = { candidates: [candidate('', 'STOP')], usageMetadata: usage(u.output), modelVersion, responseId };
    if (params.get('alt') !== 'sse') {
      // Without alt=sse: one JSON array, streamed.
      return json(res, 200, [...chunks, last]);
    }
    const events = chunks.map((c) => `data: ${JSON.stringify(c)}\r\n\r\n`);
    events.push(malformed ? 'data: {"candidates": [{"content": \r\n\r\n' : `data: ${JSON.stringify(last)}\r\n\r\n`);
    return stream(req, res, events);
  });
}
