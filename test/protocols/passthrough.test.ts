/**
 * The passthrough classes (src/protocols/passthrough.ts): each protocol's table classes the paths it does not meter
 * by the resource they name first, `other` when none; the contract's PassthroughClass is the same list, in one schema
 * every use references; a list of classes is stored once each, in that order, and a bad one is refused naming it.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { passthroughClassesOf } from '../../src/domain/workspaces/passthrough-classes.js';
import { AppError } from '../../src/errors.js';
import { protocolOf, type ProtocolProfile } from '../../src/protocols/index.js';
import { PASSTHROUGH_CLASS_NAMES } from '../../src/protocols/passthrough.js';

const bundle = JSON.parse(readFileSync(new URL('../../generated/openapi.json', import.meta.url), 'utf8'));

/** A profile, a path, its class, and the method it is called with when a POST of it is metered (default POST). */
const CLASSES: [ProtocolProfile, string, string, method?: string][] = [
  ['openai', 'v1/files', 'files'],
  ['openai', 'v1/files/file-1/content', 'files'],
  ['openai', 'v1/uploads/upload_1/parts', 'uploads'],
  ['openai', 'v1/batches', 'batches'],
  ['openai', 'v1/fine_tuning/jobs/ftjob-1/checkpoints', 'fine_tuning'],
  ['openai', 'v1/assistants', 'assistants'],
  ['openai', 'v1/threads/thread_1/runs', 'assistants'],
  ['openai', 'v1/vector_stores/vs_1/files', 'vector_stores'],
  ['openai', 'v1/vector_stores/vs_1/file_batches', 'vector_stores'],
  ['openai', 'v1/containers/cntr_1/files', 'containers'],
  ['openai', 'v1/evals/eval_1/runs', 'evals'],
  ['openai', 'v1/responses/resp_1', 'stored_responses'],
  ['openai', 'v1/responses/resp_1/input_items', 'stored_responses'],
  ['openai', 'v1/chat/completions', 'stored_responses', 'GET'],
  ['openai', 'v1/chat/completions/chatcmpl-1/messages', 'stored_responses'],
  ['openai', 'v1/conversations/conv_1/items', 'stored_responses'],
  ['openai', 'v1/realtime/client_secrets', 'realtime_client_secrets'],
  ['openai', 'v1/realtime/calls', 'realtime_client_secrets'],
  ['openai', 'v1/videos/video_1/content', 'videos'],
  // A compatible server's own prefix; an id that names another resource does not move the path.
  ['openai', 'api/openai/v1/batches/files', 'batches'],
  ['openai', 'v1/files/fine_tuning', 'files'],
  ['openai', 'v1/organization/projects', 'other'],
  ['openai', 'v1/filesystem', 'other'],
  ['azure-openai', 'openai/files', 'files'],
  ['azure-openai', 'openai/v1/vector_stores/vs_1/files', 'vector_stores'],
  ['azure-openai', 'openai/fine_tuning/jobs', 'fine_tuning'],
  ['azure-openai', 'openai/v1/realtime/client_secrets', 'realtime_client_secrets'],
  ['azure-openai', 'openai/realtimeapi/sessions', 'realtime_client_secrets'],
  // A deployment named like a resource is not that resource.
  ['azure-openai', 'openai/deployments/files/extensions/chat/completions', 'other'],
  ['anthropic', 'v1/files', 'files'],
  ['anthropic', 'v1/messages/batches/msgbatch_1/results', 'batches'],
  ['anthropic', 'v1/complete', 'other'],
  ['gemini', 'upload/v1beta/files', 'files'],
  ['gemini', 'v1beta/files/abc', 'files'],
  ['gemini', 'v1beta/batches/b1', 'batches'],
  ['gemini', 'v1beta/models/gemini-2.5-flash:batchGenerateContent', 'batches'],
  ['gemini', 'v1beta/tunedModels/t1', 'fine_tuning'],
  ['gemini', 'v1beta/fileSearchStores/s1/documents', 'vector_stores'],
  ['gemini', 'upload/v1beta/fileSearchStores/s1:uploadToFileSearchStore', 'vector_stores'],
  ['gemini', 'v1beta/cachedContents', 'cached_contents'],
  ['gemini', 'v1beta/models/imagen-4.0-generate-001:predict', 'images'],
  ['gemini', 'v1beta/models/veo-3.0-generate-001:predictLongRunning', 'videos'],
  ['gemini', 'v1beta/models/veo-3.0-generate-001/operations/op1', 'videos'],
  ['gemini', 'v1beta/operations', 'other'],
  ['gemini', 'v1alpha/auth_tokens', 'realtime_client_secrets'],
  ['gemini', 'ws/google.ai.generativelanguage.v1alpha.GenerativeService.BidiGenerateContentConstrained', 'realtime_client_secrets'],
  ['bedrock', 'async-invoke', 'async_invoke'],
  ['bedrock', 'async-invoke/arn%3Aaws%3Abedrock', 'async_invoke'],
  ['bedrock', 'guardrail/gr1/version/1/apply', 'guardrails'],
  ['bedrock', 'model/x/async-invoke', 'other'],
];

describe('the passthrough class of a path', () => {
  it.each(CLASSES)('on %s, %s is %s', (profile, route, expected, method = 'POST') => {
    const protocol = protocolOf(profile);
    // A path a protocol meters or governs is never classed: these are not.
    expect(protocol.inspectorFor(method, route)).toBeUndefined();
    expect(protocol.freeEndpointFor('GET', route)).toBeUndefined();
    expect(protocol.passthroughClassFor(route)).toBe(expected);
  });

  it('names only classes of the list, each class named by some protocol', () => {
    const named = new Set(CLASSES.map(([, , c]) => c));
    expect([...named].sort()).toEqual([...PASSTHROUGH_CLASS_NAMES].sort());
  });
});

describe("the contract's PassthroughClass", () => {
  it('is the list, in its order, in one schema every use references', () => {
    expect(bundle.components.schemas.PassthroughClass.enum).toEqual([...PASSTHROUGH_CLASS_NAMES]);
    expect(bundle.components.schemas.PassthroughClass['x-open-enum']).toBe(true);
    const text = JSON.stringify(bundle);
    expect(text.split('"realtime_client_secrets"').length - 1).toBe(1);
    expect(bundle.components.schemas.PassthroughClasses.items).toEqual({ $ref: '#/components/schemas/PassthroughClass' });
  });
});

describe('a list of classes as stored', () => {
  it('holds each once, in the list order', () => {
    expect(passthroughClassesOf(['other', 'files', 'batches'])).toEqual(['files', 'batches', 'other']);
    expect(passthroughClassesOf([])).toEqual([]);
  });

  it.each([
    [['files', 'images2'], 'passthroughClasses.1'],
    [['files', 'files'], 'passthroughClasses'],
  ])('refuses %j naming %s', (classes, param) => {
    let thrown: unknown;
    try {
      passthroughClassesOf(classes);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(AppError);
    expect(thrown).toMatchObject({ code: 'invalid_parameter', extras: { param } });
  });
});
