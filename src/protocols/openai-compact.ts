/**
 * The Responses API's compaction, `POST v1/responses/compact` (the OpenAI SDK's `responses.compact`; Azure's v1 API
 * at `openai/v1/responses/compact`), which openai.ts and azure-openai.ts meter: a model call that reads a conversation
 * (its `input` and `instructions`, and the stored conversation `previous_response_id` names) and answers it compacted
 * (`object: 'response.compaction'`: the user's messages and one encrypted compaction item), as JSON with the Responses
 * API's usage: input with its cached tokens, output with its reasoning tokens, read by the protocol's usageOf.
 *
 * Its request takes no output cap and does not stream: its output is bounded by the plan's maxOutputTokens, which it
 * cannot be sent (uncappedOutput); an answer past it is charged as reported (docs/reliability.md, "The output bound").
 * The conversation `previous_response_id` names is input the provider adds: bounded from that answer's record, as a
 * Responses API call's is (its continuation), and the compacted answer's id is remembered with its tokens the same way.
 */
import { fields, walkBody, type InputRule } from './input-estimate.js';
import { ResponsesStream } from './openai-stream.js';
import type { Continuation, EndpointSpec } from './protocol.js';

/** The request's fields that carry input, and those that are parameters (any other is counted byte for byte). */
const INPUT = fields('input', 'instructions');
const PARAMETERS = fields(
  'model',
  'previous_response_id',
  'prompt_cache_key',
  'prompt_cache_retention',
  'prompt_cache_options',
  'service_tier',
);

export type CompactEndpoint = 'responses_compact';

/**
 * The compaction endpoint of an OpenAI-shaped table, its input bounded by `rule` for the model it names (openai.ts's
 * o200k or margin), continuing a stored answer as the Responses API does (`continuation`).
 */
export function compactEndpoint(rule: (model: string) => InputRule, continuation: Continuation): Record<CompactEndpoint, EndpointSpec> {
  return {
    responses_compact: {
      label: 'responses/compact',
      operation: 'chat',
      capFields: [],
      uncappedOutput: true,
      continuation,
      input(body, tally, model) {
        walkBody(tally, body, INPUT, PARAMETERS);
        return rule(model);
      },
      // It does not stream; an upstream that would is read as a Responses API stream.
      stream: () => new ResponsesStream(),
    },
  };
}
