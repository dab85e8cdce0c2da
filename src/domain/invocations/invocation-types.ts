import type { KindColumns } from '../quota/quota-types.js';
export type InvocationStatus = 'SUCCEEDED' | 'UPSTREAM_ERROR' | 'FAILED' | 'CLIENT_ABORTED' | 'REJECTED';
export type AttemptStatus = 'SUCCEEDED' | 'UPSTREAM_ERROR' | 'FAILED' | 'ABORTED';

/** The end user whose access made a call, as it is now. */
export interface InvocationUser {
  id: string;
  email: string;
  external_user_id: string;
  name: string | null;
}

export interface InvocationRow {
  id: string;
  workspace_id: string;
  workspace_access_id: string;
  provider_connection_id: string;
  inference_key_id: string;
  request_id: string;
  trace_id: string | null;
  method: string;
  endpoint: string;
  requested_model: string;
  status: InvocationStatus;
  metering_status: 'metered' | 'unmetered';
  streamed: boolean;
  lease_id: string | null;
  quota_units: bigint;
  error_code: string | null;
  /** Why it did not succeed, in words: the gateway's refusal, or the upstream's error message. */
  error_message?: string | null;
  started_at: Date;
  first_token_at: Date | null;
  completed_at: Date | null;
  total_latency_ms: number | null;
  provider_latency_ms: number | null;
  nexus_latency_ms: number | null;
  total_ttft_ms: number | null;
  provider_ttft_ms: number | null;
  nexus_ttft_ms: number | null;
  /** A Responses API call's response id, as the provider answered it (a later call may continue it). */
  upstream_response_id?: string | null;
  /** Its attempt at the provider (a call refused before it has none): the InvocationAttemptDto's fields. */
  attempt_id: string | null;
  attempt_upstream_model: string | null;
  attempt_status: AttemptStatus | null;
  attempt_http_status: number | null;
  attempt_error_code: string | null;
  attempt_started_at: Date | null;
  attempt_first_token_at: Date | null;
  attempt_completed_at: Date | null;
  attempt_duration_ms: number | null;
  /** Read with the invocation (its USAGE event's): the call's cost and the price it was computed under, its tokens and kinds. */
  kinds?: KindColumns | null;
  cost_micros?: bigint | null;
  price_id?: string | null;
  input_tokens?: bigint | null;
  cached_input_tokens?: bigint | null;
  output_tokens?: bigint | null;
  /** Read with the invocation: the end user of its access (null: none found). */
  user?: InvocationUser | null;
  /** The route the call was made through (provider_connection_id is then the target that answered). */
  route_id?: string | null;
  /** The attempts before the last (a route's retries and fallbacks), in order; none: the call made one. */
  attempts?: EarlierAttempt[] | null;
  /** The plan of the call's access when the call was made (null: recorded before it was kept). */
  plan_id?: string | null;
  /** A Realtime turn's: its session's invocation (docs/realtime.md). */
  session_id?: string | null;
  /** A Realtime session's own invocation: its turns and how it closed. */
  session?: RealtimeSessionRecord | null;
  /** A batch's own invocation (read by getInvocation only): the batch's row. */
  batch?: InvocationBatchRow | null;
}

/** What a batch's row keeps of it (table `batches`), as its invocation shows it. */
export interface InvocationBatchRow {
  upstream_batch_id: string;
  upstream_status: string;
  requests: number;
  settled_requests: number;
  bound_units: bigint;
  settled_units: bigint;
  cost_micros: bigint;
  created_at: Date;
  expires_at: Date;
  settled_at: Date | null;
}

/** What a Realtime session's invocation keeps of it (the column `session`). */
export interface RealtimeSessionRecord {
  turns: number;
  /** The WebSocket close code the client got (or sent). */
  closeCode: number;
  /** Why it closed: `client_closed`, `session_idle_timeout`, `upstream_closed`, `server_shutdown`, `gateway_lost` (its process died), or the refusal's code. */
  closeReason: string;
  /** From its first turn with audio's start to that audio's first frame; null: no turn had audio. */
  firstAudioMs: number | null;
}

/** An attempt before a call's last, as it is kept (the InvocationAttemptDto's fields). */
export interface EarlierAttempt {
  id: string;
  sequence: number;
  providerConnectionId: string;
  /** The model the target was sent (the route's model map applied). */
  upstreamModel: string;
  status: AttemptStatus;
  startedAt: string;
  completedAt: string;
  durationMs: number;
  httpStatus?: number;
  errorCode?: string;
}
