/**
 * A call's rows as they are written (call-repo.ts), made when the call ends: its invocation, with its attempt, and its
 * settlement on its quota lease (callRows), as elements of the record statement's arrays (src/db/row-record.ts); and,
 * for a call under way, the lease_calls row its process's heartbeat writes of it, as JSON text (src/db/row-json.ts),
 * charged by the sweeper's reclaim should the process die (leaseCallRow).
 */
import { RowJson } from '../db/row-json.js';
import { recordElement } from '../db/row-record.js';
import { INVOCATION_COLUMNS } from '../domain/recording/record-sql.js';
import { LEASE_CALL_COLUMNS } from '../domain/recording/settlement-sql.js';
import type { InvocationRow } from '../domain/invocations/invocation-types.js';
import type { Pricing } from '../domain/quota/model-pricing.js';
import { newId } from '../ids.js';
import type { UsageKinds } from '../protocols/usage.js';

/** What a call consumed, as it is charged. */
export interface Consumption extends UsageKinds {
  units: bigint;
  inputTokens: bigint;
  cachedInputTokens: bigint;
  outputTokens: bigint;
  /** Of the input, written to the provider's cache; of the output, reasoning (null or absent: not reported). */
  cacheWriteTokens?: bigint | null;
  reasoningTokens?: bigint | null;
  model: string | null;
  /** What the units were priced at: the rule of the model the request named. */
  pricing: Pricing;
  /** A passed-through call's (0 units): recorded only where its price sets a price per call (docs/pricing.md). */
  perCallOnly?: boolean;
}

/** The kinds beyond text tokens of a call's row (those reported; a call of text tokens only adds nothing). */
function withKinds(row: RowJson, kinds: UsageKinds): RowJson {
  return row
    .big('audio_input_tokens', kinds.audioInputTokens)
    .big('audio_output_tokens', kinds.audioOutputTokens)
    .big('image_input_tokens', kinds.imageInputTokens)
    .big('image_output_tokens', kinds.imageOutputTokens)
    .big('images', kinds.images)
    .str('image_tier', kinds.imageTier)
    .big('audio_ms', kinds.audioMs)
    .big('characters', kinds.characters);
}

export interface CallToRecord {
  /** With its attempt's columns; its lease_id is the lease's, when it was admitted on one. */
  invocation: InvocationRow;
  /** The quota lease the call was admitted on (src/domain/quota/quota-leases.ts): its bound and the units the lease gives up. */
  lease: { id: string; bound: bigint; take: bigint } | undefined;
  /** null: nothing charged (no usage event). */
  consumed: Consumption | null;
}

/** A call's rows as the record statement reads them (elements of its arrays), made when it ends. */
export interface CallRows {
  /** The invocation's id: the key that makes its record idempotent. */
  id: string;
  /** A nexus_invocation_input. */
  invocation: string;
  /** Its settlement on its lease (a nexus_lease_call_input), when it was charged. */
  leaseCall: string | null;
}

/** The invocation row as JSON text. */
function invocationJson(i: InvocationRow): string {
  const row = new RowJson()
    .id('id', i.id)
    .id('workspace_id', i.workspace_id)
    .id('workspace_access_id', i.workspace_access_id)
    .id('provider_connection_id', i.provider_connection_id)
    .id('inference_key_id', i.inference_key_id)
    .str('request_id', i.request_id)
    .str('trace_id', i.trace_id)
    .str('method', i.method)
    .str('endpoint', i.endpoint)
    .str('requested_model', i.requested_model)
    .str('status', i.status)
    .str('metering_status', i.metering_status)
    .raw('streamed', i.streamed ? 'true' : 'false')
    .str('lease_id', i.lease_id)
    .big('quota_units', i.quota_units)
    .str('error_code', i.error_code)
    .str('error_message', i.error_message ?? null)
    .time('started_at', i.started_at)
    .time('first_token_at', i.first_token_at)
    .time('completed_at', i.completed_at)
    .num('total_latency_ms', i.total_latency_ms)
    .num('provider_latency_ms', i.provider_latency_ms)
    .num('nexus_latency_ms', i.nexus_latency_ms)
    .num('total_ttft_ms', i.total_ttft_ms)
    .num('provider_ttft_ms', i.provider_ttft_ms)
    .num('nexus_ttft_ms', i.nexus_ttft_ms)
    .str('upstream_response_id', i.upstream_response_id)
    .str('attempt_id', i.attempt_id)
    .str('attempt_upstream_model', i.attempt_upstream_model)
    .str('attempt_status', i.attempt_status)
    .num('attempt_http_status', i.attempt_http_status)
    .str('attempt_error_code', i.attempt_error_code)
    .time('attempt_started_at', i.attempt_started_at)
    .time('attempt_first_token_at', i.attempt_first_token_at)
    .time('attempt_completed_at', i.attempt_completed_at)
    .num('attempt_duration_ms', i.attempt_duration_ms)
    .str('route_id', i.route_id)
    .raw('attempts', i.attempts?.length ? JSON.stringify(i.attempts) : 'null')
    .str('plan_id', i.plan_id)
    .str('session_id', i.session_id);
  // A Realtime session's own invocation (src/realtime/realtime-record.ts); absent on every call's.
  if (i.session) row.raw('session', JSON.stringify(i.session));
  return row.done();
}

/** What the heartbeat wrote of a call under way: the units of its last row written and of the one being written, its events' ids. */
export interface Beat {
  written: bigint;
  writing: bigint;
  usage: string;
  adjustment: string;
  attempt: string;
}

export const newBeat = (): Beat => ({ written: -1n, writing: -1n, usage: newId(), adjustment: newId(), attempt: newId() });

/**
 * A call under way as the heartbeat writes it to lease_calls: what it would be charged (`counted`, at `pricing`) on
 * its lease, and its invocation as it would be recorded (`lost`), were its process to die now; its events keep the
 * ids of `beat` from one write to the next.
 */
export function leaseCallRow(
  lost: InvocationRow,
  lease: { id: string; bound: bigint },
  counted: Omit<Consumption, 'model' | 'pricing'>,
  pricing: Pricing,
  beat: Beat,
): string {
  return withKinds(new RowJson(), counted)
    .id('invocation_id', lost.id)
    .id('lease_id', lease.id)
    .big('bound', lease.bound)
    .big('units', counted.units)
    .big('input_tokens', counted.inputTokens)
    .big('cached_tokens', counted.cachedInputTokens)
    .big('output_tokens', counted.outputTokens)
    .big('cache_write_tokens', counted.cacheWriteTokens)
    .big('reasoning_tokens', counted.reasoningTokens)
    .str('model', lost.attempt_upstream_model || null)
    .str('model_rule', pricing.rule)
    .big('input_ppm', pricing.inputMultiplierPpm)
    .big('cached_ppm', pricing.cachedInputMultiplierPpm)
    .big('output_ppm', pricing.outputMultiplierPpm)
    .id('usage_id', beat.usage)
    .id('adjustment_id', beat.adjustment)
    .raw('invocation', invocationJson(lost))
    .done();
}

export function callRows(c: CallToRecord): CallRows {
  const i = c.invocation;
  const invocation = recordElement(INVOCATION_COLUMNS, i);
  // A call charged nothing moves nothing on its lease and has no event.
  if (!c.lease || !c.consumed) return { id: i.id, invocation, leaseCall: null };
  const consumed = c.consumed;
  const leaseCall = recordElement(LEASE_CALL_COLUMNS, {
    lease_id: c.lease.id,
    bound: c.lease.bound,
    take: c.lease.take,
    units: consumed.units,
    charged: true,
    usage_id: newId(),
    adjustment_id: consumed.units > c.lease.bound ? newId() : null,
    invocation_id: i.id,
    input_tokens: consumed.inputTokens,
    cached_tokens: consumed.cachedInputTokens,
    output_tokens: consumed.outputTokens,
    model: consumed.model,
    at: i.completed_at ?? new Date(),
    model_rule: consumed.pricing.rule,
    input_ppm: consumed.pricing.inputMultiplierPpm,
    cached_ppm: consumed.pricing.cachedInputMultiplierPpm,
    output_ppm: consumed.pricing.outputMultiplierPpm,
    cache_write_tokens: consumed.cacheWriteTokens,
    reasoning_tokens: consumed.reasoningTokens,
    audio_input_tokens: consumed.audioInputTokens,
    audio_output_tokens: consumed.audioOutputTokens,
    image_input_tokens: consumed.imageInputTokens,
    image_output_tokens: consumed.imageOutputTokens,
    images: consumed.images,
    audio_ms: consumed.audioMs,
    characters: consumed.characters,
    image_tier: consumed.imageTier,
    per_call_only: consumed.perCallOnly || null,
  });
  return { id: i.id, invocation, leaseCall };
}
