/**
 * A stream's answer assembled by its protocol's reader for a request log (docs/request-logs.md): its text and its tool
 * calls, from the events as each API streams them, and the text cut at its bound.
 */
import { describe, expect, it } from 'vitest';
import { inspectorFor } from '../../src/protocols/inspectors.js';
import type { ProtocolProfile } from '../../src/protocols/index.js';
import { AssembledAnswer } from '../../src/protocols/stream.js';

type Json = Record<string, unknown>;

function assembled(profile: ProtocolProfile, route: string, events: Json[], max = 1024) {
  const reader = inspectorFor(profile, 'POST', route)!.stream();
  const answer = new AssembledAnswer(max);
  for (const event of events) reader.assemble!(event, answer);
  return { text: answer.text, truncated: answer.truncated, bytes: answer.bytes, toolCalls: [...answer.toolCalls.values()] };
}

describe("each protocol's stream, assembled", () => {
  it('OpenAI Responses: its output text deltas, its function calls', () => {
    const out = assembled('openai', 'v1/responses', [
      { type: 'response.created', response: {} },
      { type: 'response.output_text.delta', output_index: 0, delta: 'Hello' },
      { type: 'response.output_text.delta', output_index: 0, delta: ', world' },
      {
        type: 'response.output_item.added',
        output_index: 1,
        item: { type: 'function_call', call_id: 'c1', name: 'lookup', arguments: '' },
      },
      { type: 'response.function_call_arguments.delta', output_index: 1, delta: '{"q":' },
      { type: 'response.function_call_arguments.delta', output_index: 1, delta: '1}' },
    ]);
    expect(out).toMatchObject({ text: 'Hello, world', toolCalls: [{ id: 'c1', name: 'lookup', arguments: '{"q":1}' }] });
  });

  it("Anthropic Messages: its text deltas, its tool_use blocks' input", () => {
    const out = assembled('anthropic', 'v1/messages', [
      { type: 'message_start', message: { usage: { input_tokens: 3 } } },
      { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Let me check.' } },
      { type: 'content_block_start', index: 1, content_block: { type: 'tool_use', id: 'toolu_1', name: 'weather', input: {} } },
      { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '{"city":' } },
      { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '"Oslo"}' } },
      { type: 'message_delta', delta: { stop_reason: 'tool_use' }, usage: { output_tokens: 9 } },
    ]);
    expect(out).toMatchObject({ text: 'Let me check.', toolCalls: [{ id: 'toolu_1', name: 'weather', arguments: '{"city":"Oslo"}' }] });
  });

  it('Gemini: its text parts (not its thoughts), its function calls', () => {
    const out = assembled('gemini', 'v1beta/models/gemini-2.5-flash:streamGenerateContent', [
      { candidates: [{ content: { parts: [{ text: 'thinking', thought: true }, { text: 'Bonjour' }] } }] },
      { candidates: [{ content: { parts: [{ functionCall: { name: 'translate', args: { to: 'en' } } }] }, finishReason: 'STOP' }] },
    ]);
    expect(out).toMatchObject({ text: 'Bonjour', toolCalls: [{ name: 'translate', arguments: '{"to":"en"}' }] });
  });

  it('Bedrock ConverseStream: its text deltas, its tool uses', () => {
    const out = assembled('bedrock', 'model/anthropic.claude-3-haiku/converse-stream', [
      { contentBlockDelta: { contentBlockIndex: 0, delta: { text: 'Sure' } } },
      { contentBlockStart: { contentBlockIndex: 1, start: { toolUse: { toolUseId: 't1', name: 'sum' } } } },
      { contentBlockDelta: { contentBlockIndex: 1, delta: { toolUse: { input: '{"a":1}' } } } },
    ]);
    expect(out).toMatchObject({ text: 'Sure', toolCalls: [{ id: 't1', name: 'sum', arguments: '{"a":1}' }] });
  });

  it('cuts the text at its bound, on a character, and says so', () => {
    const out = assembled(
      'openai',
      'v1/chat/completions',
      [{ choices: [{ index: 0, delta: { content: 'ééé' } }] }, { choices: [{ index: 0, delta: { content: 'x'.repeat(10) } }] }],
      5,
    );
    expect(out).toEqual({ text: 'éé', truncated: true, bytes: 16, toolCalls: [] });
  });
});
