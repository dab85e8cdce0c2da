/**
 * The metered endpoints, one row each (docs/architecture.md, "Adding an endpoint"): the path that names it on its
 * protocol, its names for a person and for a span, the bounds and kinds its table reads from a request, and the usage
 * it reads from an answer. A new endpoint adds a row; `withEndpoints`, which adds an endpoint module's rows to a
 * protocol (src/protocols/index.ts), is tested below the rows.
 */
import { describe, expect, it } from 'vitest';
import { AppError } from '../../src/errors.js';
import { protocolOf, withEndpoints, type ProtocolProfile } from '../../src/protocols/index.js';
import { FOREIGN } from '../../src/protocols/input-estimate.js';
import { prepareCall, usageFromJson } from '../../src/protocols/inspectors.js';
import type { PreparedCall } from '../../src/protocols/protocol.js';
import type { Usage } from '../../src/protocols/usage.js';

const caps = { maxOutputTokens: 1000, clamp: true };

export interface EndpointRow {
  profile: ProtocolProfile;
  /** A path of it, as the gateway routes it (after the connection's prefix). */
  route: string;
  endpoint: string;
  label: string;
  operation: string;
  /** A request, and what its table reads of it (the model named by the path or the body, bounds, kinds). */
  request: Record<string, unknown>;
  prepared: Partial<PreparedCall>;
  /** A request it refuses (400), and the field named. */
  refused?: [request: Record<string, unknown>, param: string];
  /** An answer and its usage; none: its answers report no usage, and it is charged `prepared.unreported`. */
  answer?: [body: Record<string, unknown>, usage: Partial<Usage>];
}

export const ENDPOINTS: EndpointRow[] = [
  {
    profile: 'openai',
    route: 'v1/chat/completions',
    endpoint: 'chat',
    label: 'chat/completions',
    operation: 'chat',
    request: { model: 'gpt-4o', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] },
    prepared: { requestedModel: 'gpt-4o', stream: false, outputBound: 50n },
    answer: [
      { model: 'gpt-4o-2024-08-06', usage: { prompt_tokens: 9, completion_tokens: 3 } },
      { inputTokens: 9n, outputTokens: 3n },
    ],
  },
  {
    profile: 'openai',
    route: 'v1/images/generations',
    endpoint: 'images',
    label: 'images/generations',
    operation: 'image_generation',
    request: { model: 'dall-e-3', prompt: 'a kite', size: '1024x1792', quality: 'hd' },
    // dall-e reports no usage: one image of the tier it asks for.
    prepared: {
      requestedModel: 'dall-e-3',
      outputBound: 0n,
      boundKinds: { imageInputTokens: 0n, imageOutputTokens: 0n, images: 1n, imageTier: 'hd/1024x1792' },
      unreported: {
        inputTokens: 0n,
        cachedInputTokens: 0n,
        outputTokens: 0n,
        imageInputTokens: 0n,
        imageOutputTokens: 0n,
        images: 1n,
        imageTier: 'hd/1024x1792',
      },
    },
    refused: [{ model: 'dall-e-3', prompt: 'a kite', size: 'huge' }, 'size'],
  },
  {
    profile: 'azure-openai',
    route: 'openai/deployments/tts-1/audio/speech',
    endpoint: 'speech',
    label: 'audio/speech',
    operation: 'text_to_speech',
    request: { input: 'hello', voice: 'alloy' },
    // The deployment names the model; tts-1 is billed by the input's characters.
    prepared: {
      requestedModel: 'tts-1',
      boundKinds: { characters: 5n },
      unreported: { inputTokens: 0n, cachedInputTokens: 0n, outputTokens: 0n, characters: 5n },
    },
    refused: [{ input: 'hello', speed: 9 }, 'speed'],
  },
  {
    profile: 'anthropic',
    route: 'v1/messages',
    endpoint: 'messages',
    label: 'messages',
    operation: 'chat',
    request: { model: 'claude-sonnet-4-5', max_tokens: 30, messages: [{ role: 'user', content: 'hi' }] },
    prepared: { requestedModel: 'claude-sonnet-4-5', outputBound: 30n },
    answer: [
      { model: 'claude-sonnet-4-5', usage: { input_tokens: 8, output_tokens: 2 } },
      { inputTokens: 8n, outputTokens: 2n },
    ],
  },
  {
    profile: 'gemini',
    route: 'v1beta/models/gemini-2.5-flash:generateContent',
    endpoint: 'generate',
    label: 'generateContent',
    operation: 'generate_content',
    request: { contents: 'hi', generationConfig: { maxOutputTokens: 20 } },
    prepared: { requestedModel: 'gemini-2.5-flash', outputBound: 20n },
    answer: [
      { modelVersion: 'gemini-2.5-flash-001', usageMetadata: { promptTokenCount: 4, candidatesTokenCount: 6 } },
      { inputTokens: 4n, outputTokens: 6n },
    ],
  },
  {
    profile: 'gemini',
    route: 'v1beta/models/text-embedding-004:embedContent',
    endpoint: 'embed',
    label: 'embedContent',
    operation: 'embeddings',
    request: { content: { parts: [{ text: 'hi' }] } },
    prepared: { requestedModel: 'text-embedding-004', outputBound: 0n },
  },
  {
    profile: 'bedrock',
    route: 'model/amazon.nova-lite-v1:0/converse',
    endpoint: 'converse',
    label: 'converse',
    operation: 'chat',
    request: { messages: [{ role: 'user', content: [{ text: 'hi' }] }], inferenceConfig: { maxTokens: 40 } },
    prepared: { requestedModel: 'amazon.nova-lite-v1:0', outputBound: 40n },
    answer: [{ usage: { inputTokens: 5, outputTokens: 2, totalTokens: 7 } }, { inputTokens: 5n, outputTokens: 2n }],
  },
  {
    profile: 'bedrock',
    route: 'model/us.amazon.nova-canvas-v1:0/invoke',
    endpoint: 'nova_canvas',
    label: 'invoke (amazon.nova-canvas)',
    operation: 'image_generation',
    request: {
      taskType: 'TEXT_IMAGE',
      textToImageParams: { text: 'a kite' },
      imageGenerationConfig: { numberOfImages: 2, quality: 'premium', width: 1024, height: 1024 },
    },
    // Billed per image, reporting nothing: its images of the tier `{quality}/{size class}`.
    prepared: {
      requestedModel: 'us.amazon.nova-canvas-v1:0',
      stream: false,
      outputBound: 0n,
      boundKinds: { images: 2n, imageTier: 'premium/1024x1024' },
      unreported: { inputTokens: 0n, cachedInputTokens: 0n, outputTokens: 0n, images: 2n, imageTier: 'premium/1024x1024' },
    },
    refused: [{ taskType: 'TEXT_IMAGE', imageGenerationConfig: { width: 100, height: 1024 } }, 'imageGenerationConfig.width'],
  },
];

const json = (body: unknown) => Buffer.from(JSON.stringify(body));

describe.each(ENDPOINTS)('$profile $route', (row) => {
  const protocol = protocolOf(row.profile);
  const inspector = protocol.inspectorFor('POST', row.route)!;
  const routeModel = protocol.routeModel?.(row.route);

  it('is metered by its path, under its names for a person and a span', () => {
    expect(inspector).toMatchObject({ endpoint: row.endpoint, label: row.label, operation: row.operation });
    expect(protocol.meters.split(', ')).toContain(row.label);
    expect(protocol.inspectorFor('GET', row.route)).toBeUndefined();
  });

  it('reads its bounds and kinds from a request', () => {
    expect(prepareCall(inspector, json(row.request), caps, routeModel)).toMatchObject(row.prepared);
  });

  // Only the rows that name such a request or answer have these two tests (none is listed as skipped).
  if (row.refused) {
    const [request, param] = row.refused;
    it('refuses a request it cannot bound, naming the field', () => {
      let thrown: unknown;
      try {
        prepareCall(inspector, json(request), caps, routeModel);
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(AppError);
      expect(thrown).toMatchObject({ code: 'invalid_parameter', extras: { param } });
    });
  }

  if (row.answer) {
    const [body, usage] = row.answer;
    it('reads the usage its answer reports', () => {
      expect(usageFromJson(inspector, JSON.stringify(body)).usage).toMatchObject(usage);
    });
  }
});

describe('withEndpoints: an endpoint module added to a protocol', () => {
  const gemini = protocolOf('gemini');
  const rows = {
    metered: [[/^v1beta\/models\/[^/:]+:(?:echo|generateContent)$/i, 'echo']] as const,
    endpoints: {
      echo: {
        label: 'echo',
        operation: 'echo',
        capFields: [],
        input: () => FOREIGN,
        stream: () => gemini.inspectorFor('POST', 'v1beta/models/m:generateContent')!.stream(),
      },
    },
  };

  it("meters its paths after the protocol's own, keeps the rest of the table, and leaves the protocol as it was", () => {
    const added = withEndpoints(gemini, rows);
    expect(added.inspectorFor('POST', 'v1beta/models/m:echo')).toMatchObject({ endpoint: 'echo', protocol: added });
    expect(added.inspectorFor('POST', 'v1beta/models/m:generateContent')).toMatchObject({ endpoint: 'generate', protocol: added });
    expect(added.inspectorFor('POST', 'v1beta/models/m:streamGenerateContent')).toMatchObject({
      endpoint: 'stream_generate',
      protocol: added,
    });
    expect(added.meters).toBe(`${gemini.meters}, echo`);
    expect(added).toMatchObject({ profile: 'gemini', errorShape: gemini.errorShape, passedBack: gemini.passedBack, bodyShape: 'gemini' });
    expect(added.freeEndpointFor('POST', 'v1beta/models/m:countTokens')).toEqual({ kind: 'model', model: 'm' });
    expect(gemini.inspectorFor('POST', 'v1beta/models/m:echo')).toBeUndefined();
  });

  it('refuses a name the protocol has already', () => {
    expect(() => withEndpoints(gemini, { metered: [], endpoints: { generate: rows.endpoints.echo } })).toThrow(
      /endpoint 'generate' already/,
    );
  });
});
