import type { Knex } from 'knex';

/**
 * The record statement's input as rows of composite types (docs/performance.md, "The record statement's input"): a
 * batch's invocations and their settlements on their leases arrive as arrays of these, read by position
 * (`unnest(cast($n as nexus_invocation_input[]))`), where they arrived as JSON arrays of objects read by key
 * (json_populate_recordset, json_to_recordset), which cost PostgreSQL a hash table per row. The attributes are the
 * columns src/domain/recording/record-sql.ts (INVOCATION_COLUMNS) and settlement-sql.ts (LEASE_CALL_COLUMNS) name,
 * in their order, with the types of invocations' columns and of the settlement's fields.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`create type nexus_invocation_input as (
    id uuid, workspace_id uuid, workspace_access_id uuid, provider_connection_id uuid, inference_key_id uuid,
    request_id text, trace_id text, method text, endpoint text, requested_model text, status text, metering_status text,
    streamed boolean, lease_id uuid, quota_units bigint, error_code text, error_message text,
    started_at timestamptz, first_token_at timestamptz, completed_at timestamptz,
    total_latency_ms double precision, provider_latency_ms double precision, nexus_latency_ms double precision,
    total_ttft_ms double precision, provider_ttft_ms double precision, nexus_ttft_ms double precision,
    upstream_response_id text, attempt_id uuid, attempt_upstream_model text, attempt_status text,
    attempt_http_status integer, attempt_error_code text, attempt_started_at timestamptz,
    attempt_first_token_at timestamptz, attempt_completed_at timestamptz, attempt_duration_ms double precision,
    route_id uuid, attempts jsonb, plan_id uuid, session_id uuid, session jsonb)`);
  await knex.raw(`create type nexus_lease_call_input as (
    lease_id uuid, bound bigint, take bigint, units bigint, charged boolean, usage_id uuid, adjustment_id uuid,
    invocation_id uuid, input_tokens bigint, cached_tokens bigint, output_tokens bigint, model text, at timestamptz,
    model_rule text, input_ppm bigint, cached_ppm bigint, output_ppm bigint, cache_write_tokens bigint,
    reasoning_tokens bigint, audio_input_tokens bigint, audio_output_tokens bigint, image_input_tokens bigint,
    image_output_tokens bigint, images bigint, audio_ms bigint, characters bigint, image_tier text, per_call_only boolean)`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop type nexus_lease_call_input');
  await knex.raw('drop type nexus_invocation_input');
}
