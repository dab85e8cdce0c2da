import type {
  InvocationAttemptDto,
  InvocationBatchDto,
  InvocationDto,
  RealtimeSessionDto,
  UsageEventDto,
  UsageSummaryDto,
} from '../../../generated/client/types.gen.js';
import type { KindColumns, UsageEventRow } from '../../domain/quota/quota-types.js';
import type { InvocationBatchRow, InvocationRow, RealtimeSessionRecord } from '../../domain/invocations/invocation-types.js';
import type { UsageGranularity, UsageGroupBy } from '../../domain/invocations/invocation-repo.js';
import type { UsageSummary } from '../../domain/invocations/invocation-service.js';

const iso = (d: Date | null | undefined) => (d ? { value: d.toISOString() } : undefined);
const ms = (n: number | null) => (n === null || n === undefined ? undefined : Math.round(Number(n) * 1000) / 1000);

/** The kinds beyond text tokens of an event (or of an invocation's USAGE event) on the wire: those it has. */
function kindsDto(row: KindColumns | null | undefined): Pick<UsageEventDto, KindName | 'imageTier'> {
  const dto: Pick<UsageEventDto, KindName | 'imageTier'> = {};
  if (!row) return dto;
  for (const [name, column] of KINDS) {
    const value = row[column];
    if (value !== null && value !== undefined) dto[name] = `${value}`;
  }
  if (row.image_tier) dto.imageTier = row.image_tier;
  return dto;
}

type KindName = 'audioInputTokens' | 'audioOutputTokens' | 'imageInputTokens' | 'imageOutputTokens' | 'images' | 'audioMs' | 'characters';
const KINDS: [KindName, Exclude<keyof KindColumns, 'image_tier'>][] = [
  ['audioInputTokens', 'audio_input_tokens'],
  ['audioOutputTokens', 'audio_output_tokens'],
  ['imageInputTokens', 'image_input_tokens'],
  ['imageOutputTokens', 'image_output_tokens'],
  ['images', 'images'],
  ['audioMs', 'audio_ms'],
  ['characters', 'characters'],
];

export function toUsageEventDto(row: UsageEventRow): UsageEventDto {
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    workspaceAccessId: row.workspace_access_id,
    quotaPeriodId: row.quota_period_id,
    ...(row.lease_id ? { leaseId: row.lease_id, reservationId: row.lease_id } : {}),
    ...(row.invocation_id ? { invocationId: row.invocation_id } : {}),
    kind: row.kind,
    units: `${row.units}`,
    inputTokens: `${row.input_tokens}`,
    cachedInputTokens: `${row.cached_input_tokens}`,
    outputTokens: `${row.output_tokens}`,
    ...(row.cache_write_tokens !== null && row.cache_write_tokens !== undefined ? { cacheWriteTokens: `${row.cache_write_tokens}` } : {}),
    ...(row.reasoning_tokens !== null && row.reasoning_tokens !== undefined ? { reasoningTokens: `${row.reasoning_tokens}` } : {}),
    ...kindsDto(row),
    ...(row.model ? { model: row.model } : {}),
    ...(row.reason ? { reason: row.reason } : {}),
    ...(row.model_rule ? { modelRule: row.model_rule } : {}),
    ...(row.input_multiplier_ppm !== null && row.input_multiplier_ppm !== undefined
      ? {
          inputMultiplierPpm: `${row.input_multiplier_ppm}`,
          cachedInputMultiplierPpm: `${row.cached_input_multiplier_ppm ?? 0n}`,
          outputMultiplierPpm: `${row.output_multiplier_ppm ?? 0n}`,
        }
      : {}),
    ...(row.cost_micros !== null && row.cost_micros !== undefined ? { costMicros: `${row.cost_micros}` } : {}),
    ...(row.price_id ? { priceId: row.price_id } : {}),
    createdAt: row.created_at.toISOString(),
  };
}

/** The invocation's attempt at the provider, when it made one. */
function toAttemptDto(row: InvocationRow): InvocationAttemptDto | undefined {
  if (!row.attempt_id) return undefined;
  const dto: InvocationAttemptDto = {
    id: row.attempt_id,
    sequence: (row.attempts?.length ?? 0) + 1,
    providerConnectionId: row.provider_connection_id,
    upstreamModel: row.attempt_upstream_model ?? '',
    status: row.attempt_status!,
    startedAt: row.attempt_started_at!.toISOString(),
  };
  if (row.attempt_first_token_at) dto.firstTokenAt = row.attempt_first_token_at.toISOString();
  if (row.attempt_completed_at) dto.completedAt = row.attempt_completed_at.toISOString();
  if (row.attempt_duration_ms !== null) dto.durationMs = ms(row.attempt_duration_ms)!;
  if (row.attempt_http_status !== null) dto.httpStatus = row.attempt_http_status;
  if (row.attempt_error_code) dto.errorCode = row.attempt_error_code;
  return dto;
}

export function toInvocationDto(row: InvocationRow, usageEvents?: UsageEventRow[]): InvocationDto {
  const dto: InvocationDto = {
    id: row.id,
    requestId: row.request_id,
    workspaceId: row.workspace_id,
    workspaceAccessId: row.workspace_access_id,
    requestedModel: row.requested_model,
    providerConnectionId: row.provider_connection_id,
    status: row.status,
    quotaUnits: `${row.quota_units}`,
    startedAt: row.started_at.toISOString(),
  };
  if (row.trace_id) dto.traceId = row.trace_id;
  if (row.error_code) dto.errorCode = row.error_code;
  if (row.error_message) dto.errorMessage = row.error_message;
  dto.inferenceKeyId = row.inference_key_id;
  dto.method = row.method;
  dto.endpoint = row.endpoint;
  dto.streamed = row.streamed;
  if (row.user) {
    dto.user = { id: row.user.id, externalUserId: row.user.external_user_id, email: row.user.email };
    if (row.user.name) dto.user.name = row.user.name;
  }
  if (row.input_tokens !== null && row.input_tokens !== undefined) {
    dto.inputTokens = `${row.input_tokens}`;
    dto.cachedInputTokens = `${row.cached_input_tokens ?? 0n}`;
    dto.outputTokens = `${row.output_tokens ?? 0n}`;
  }
  const first = iso(row.first_token_at);
  if (first) dto.firstTokenAt = first.value;
  const done = iso(row.completed_at);
  if (done) dto.completedAt = done.value;
  const numbers = {
    totalLatencyMs: ms(row.total_latency_ms),
    nexusLatencyMs: ms(row.nexus_latency_ms),
    providerLatencyMs: ms(row.provider_latency_ms),
    totalTtftMs: ms(row.total_ttft_ms),
    nexusTtftMs: ms(row.nexus_ttft_ms),
    providerTtftMs: ms(row.provider_ttft_ms),
  };
  for (const [k, v] of Object.entries(numbers)) if (v !== undefined) (dto as Record<string, unknown>)[k] = v;
  const attempt = toAttemptDto(row);
  if (attempt) dto.attempt = attempt;
  const usage = usageEvents?.find((e) => e.kind === 'USAGE');
  Object.assign(dto, kindsDto(row.kinds ?? usage));
  const cost = row.cost_micros ?? usage?.cost_micros;
  if (cost !== null && cost !== undefined) dto.costMicros = `${cost}`;
  const priceId = row.price_id ?? usage?.price_id;
  if (priceId) dto.priceId = priceId;
  if (row.route_id) dto.routeId = row.route_id;
  if (row.plan_id) dto.planId = row.plan_id;
  if (row.session_id) dto.sessionId = row.session_id;
  if (row.session) dto.session = toSessionDto(row.session);
  if (row.batch) dto.batch = toBatchDto(row.batch);
  // getInvocation (with its events) lists every attempt; a list shows the last.
  if (usageEvents && (attempt || row.attempts?.length)) dto.attempts = [...(row.attempts ?? []), ...(attempt ? [attempt] : [])];
  if (usageEvents) dto.usageEvents = usageEvents.map(toUsageEventDto);
  return dto;
}

/** A Realtime session's invocation's own fields. */
function toSessionDto(session: RealtimeSessionRecord): RealtimeSessionDto {
  const dto: RealtimeSessionDto = { turns: session.turns, closeCode: session.closeCode, closeReason: session.closeReason };
  if (session.firstAudioMs !== null) dto.firstAudioMs = session.firstAudioMs;
  return dto;
}

/** A batch's invocation's own fields: its counts, bound, settled units and cost. */
function toBatchDto(b: InvocationBatchRow): InvocationBatchDto {
  const dto: InvocationBatchDto = {
    batchId: b.upstream_batch_id,
    upstreamStatus: b.upstream_status,
    requests: b.requests,
    settledRequests: b.settled_requests,
    boundUnits: `${b.bound_units}`,
    settledUnits: `${b.settled_units}`,
    costMicros: `${b.cost_micros}`,
    createdAt: b.created_at.toISOString(),
    expiresAt: b.expires_at.toISOString(),
  };
  if (b.settled_at) dto.settledAt = b.settled_at.toISOString();
  return dto;
}

/** The summary's answer without its buckets (streamed after it, as the domain makes them). */
export function toUsageSummaryHead(
  workspaceId: string,
  granularity: UsageGranularity,
  groupBy: UsageGroupBy,
  summary: UsageSummary,
): Omit<UsageSummaryDto, 'buckets'> {
  return {
    workspaceId,
    since: summary.since.toISOString(),
    until: summary.until.toISOString(),
    granularity,
    timeZone: summary.timeZone,
    groupBy,
    currency: summary.currency,
    ...(summary.keys === undefined ? {} : { keyCount: summary.keys }),
  };
}
