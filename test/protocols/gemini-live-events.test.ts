/**
 * What a Gemini Live session's relay reads of its messages (src/realtime/gemini-events.ts): a message's name from its
 * first bytes, the turns a client asks for, a model's output and its audio, the usage by modality (cached media with
 * the cached input), and a refusal's close reason within a close frame's 123 bytes.
 */
import { describe, expect, it } from 'vitest';
import { AppError } from '../../src/errors.js';
import {
  asksForTurn,
  endsOrCounts,
  liveUsage,
  messageKey,
  outputOf,
  refusalReason,
  setupCap,
  setupMessage,
  setupModel,
} from '../../src/realtime/gemini-events.js';

describe("a Live session's messages", () => {
  it('are named by their one key, read from their first bytes', () => {
    expect(messageKey('{"serverContent": {"modelTurn": {"parts": [')).toBe('serverContent');
    expect(messageKey(' {\n  "setupComplete": {}}')).toBe('setupComplete');
    expect(messageKey('{"client_content":{"turn_complete":true}}')).toBe('clientContent');
    expect(messageKey('[1,2]')).toBe('');
  });

  it('ask for a turn by clientContent with turnComplete, or by activityEnd', () => {
    expect(asksForTurn('clientContent', { clientContent: { turns: [], turnComplete: true } })).toBe(true);
    expect(asksForTurn('clientContent', { clientContent: { turns: [] } })).toBe(false);
    expect(asksForTurn('realtimeInput', { realtimeInput: { activityEnd: {} } })).toBe(true);
    expect(asksForTurn('realtimeInput', { realtimeInput: { audio: { data: 'AAAA' } } })).toBe(false);
    expect(asksForTurn('toolResponse', { toolResponse: {} })).toBe(false);
    // The API takes its fields in snake_case too.
    expect(asksForTurn('clientContent', { client_content: { turn_complete: true } })).toBe(true);
    expect(asksForTurn('realtimeInput', { realtime_input: { activity_end: {} } })).toBe(true);
  });

  it("carry a model's output (its audio by its inline data's type), and are parsed whole only to end a turn or count it", () => {
    const audio = '{"serverContent":{"modelTurn":{"parts":[{"inlineData":{"mimeType":"audio/pcm;rate=24000","data":"';
    expect(outputOf('serverContent', audio)).toEqual({ output: true, audio: true });
    expect(outputOf('serverContent', '{"serverContent":{"modelTurn":{"parts":[{"text":"hi"}]}}}')).toEqual({ output: true, audio: false });
    expect(outputOf('serverContent', '{"serverContent":{"inputTranscription":{"text":"hi"}}}')).toEqual({ output: false, audio: false });
    expect(outputOf('toolCall', '{"toolCall":{"functionCalls":[]}}')).toEqual({ output: true, audio: false });
    expect(endsOrCounts(Buffer.from(`${audio}AAAA"}}]}}}`))).toBe(false);
    expect(endsOrCounts(Buffer.from('{"serverContent":{"turnComplete":true}}'))).toBe(true);
    // A text that names the key is escaped in its JSON: not a marker.
    expect(endsOrCounts(Buffer.from(JSON.stringify({ serverContent: { modelTurn: { parts: [{ text: '"turnComplete"' }] } } })))).toBe(
      false,
    );
  });

  it('set up a session: its model without its prefix, its cap, and the setup sent with the mapped model and a cap', () => {
    const setup = { model: 'models/gemini-live', generationConfig: { responseModalities: ['AUDIO'], maxOutputTokens: 500 } };
    expect(setupModel(setup)).toBe('gemini-live');
    expect(setupCap(setup)).toBe(500);
    expect(setupCap({ model: 'models/x' })).toBeUndefined();
    const snake = { model: 'models/x', generation_config: { max_output_tokens: 900, temperature: 0 } };
    expect(setupCap(snake)).toBe(900);
    expect(JSON.parse(setupMessage(snake, 'x', 100))).toEqual({
      setup: { model: 'models/x', generation_config: { max_output_tokens: 100, temperature: 0 } },
    });
    expect(JSON.parse(setupMessage(setup, 'mapped', 100))).toEqual({
      setup: { model: 'models/mapped', generationConfig: { responseModalities: ['AUDIO'], maxOutputTokens: 100 } },
    });
  });

  it('report usage by modality: audio and image (video frames too), the input counted apart uncached', () => {
    const usage = liveUsage({
      usageMetadata: {
        promptTokenCount: 300,
        cachedContentTokenCount: 100,
        responseTokenCount: 80,
        thoughtsTokenCount: 20,
        toolUsePromptTokenCount: 10,
        promptTokensDetails: [
          { modality: 'TEXT', tokenCount: 50 },
          { modality: 'AUDIO', tokenCount: 150 },
          { modality: 'IMAGE', tokenCount: 40 },
          { modality: 'VIDEO', tokenCount: 60 },
        ],
        cacheTokensDetails: [
          { modality: 'AUDIO', tokenCount: 70 },
          { modality: 'VIDEO', tokenCount: 30 },
        ],
        responseTokensDetails: [
          { modality: 'TEXT', tokenCount: 30 },
          { modality: 'AUDIO', tokenCount: 50 },
        ],
      },
    });
    expect(usage).toEqual({
      inputTokens: 310n,
      cachedInputTokens: 100n,
      outputTokens: 100n,
      reasoningTokens: 20n,
      audioInputTokens: 80n,
      imageInputTokens: 70n,
      audioOutputTokens: 50n,
      imageOutputTokens: 0n,
    });
    expect(liveUsage({ serverContent: { turnComplete: true } })).toBeNull();
  });

  it("close a refused session with its code and message, within a close frame's 123 bytes, on a character's boundary", () => {
    const short = new AppError('quota_insufficient', 'This turn may need up to 300 units; 179 are available');
    expect(refusalReason(short)).toBe('quota_insufficient: This turn may need up to 300 units; 179 are available');
    const long = refusalReason(new AppError('model_not_allowed', `The model '${'é'.repeat(80)}' is not allowed on this plan`));
    expect(Buffer.byteLength(long)).toBeLessThanOrEqual(123);
    expect(long).toMatch(/^model_not_allowed: The model 'é+$/);
  });
});
