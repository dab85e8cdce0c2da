/** The invocation record as a pure function of a call's start, what its request was read for and its outcome. */
import { describe, expect, it } from 'vitest';
import { invocationRecord, NOTHING_READ, type CallAttempted, type CallOpened } from '../../src/records/invocation-record.js';

const STARTED = new Date('2026-01-01T00:00:00.000Z');
const opened: CallOpened = {
  id: '00000000-0000-7000-8000-000000000001',
  workspaceId: '00000000-0000-7000-8000-000000000002',
  accessId: '00000000-0000-7000-8000-000000000003',
  connectionId: '00000000-0000-7000-8000-000000000004',
  keyId: '00000000-0000-7000-8000-000000000005',
  requestId: 'req_1',
  traceId: null,
  method: 'POST',
  endpoint: 'v1/chat/completions',
  startedAt: STARTED,
  metered: true,
};
const read = { requestedModel: 'gpt-test', streamed: true, leaseId: '00000000-0000-7000-8000-000000000006' };
const at = (ms: number) => new Date(STARTED.getTime() + ms);

const answered: CallAttempted = {
  upstream: true,
  status: 'SUCCEEDED',
  errorCode: null,
  quotaUnits: 42n,
  completedAt: at(900),
  totalLatencyMs: 900,
  upstreamResponseId: null,
  attemptId: '00000000-0000-7000-8000-000000000007',
  attemptStatus: 'SUCCEEDED',
  upstreamModel: 'gpt-test-2026-01-01',
  httpStatus: 200,
  attemptStartedAt: at(100),
  attemptDurationMs: 780,
  providerLatencyMs: 780,
  providerTtftMs: 200,
  totalTtftMs: 320,
};

describe('invocationRecord', () => {
  it('records a call refused before its request was read: no model, no attempt, nothing charged', () => {
    const row = invocationRecord({ ...opened, metered: false }, NOTHING_READ, {
      upstream: false,
      status: 'REJECTED',
      errorCode: 'unmetered_endpoint',
      errorMessage: 'POST /v1/files is not metered',
      completedAt: at(3),
      totalLatencyMs: 2.5,
    });
    expect(row).toMatchObject({
      id: opened.id,
      workspace_id: opened.workspaceId,
      workspace_access_id: opened.accessId,
      provider_connection_id: opened.connectionId,
      inference_key_id: opened.keyId,
      request_id: 'req_1',
      requested_model: '',
      status: 'REJECTED',
      metering_status: 'unmetered',
      streamed: false,
      lease_id: null,
      quota_units: 0n,
      error_code: 'unmetered_endpoint',
      error_message: 'POST /v1/files is not metered',
      completed_at: at(3),
      total_latency_ms: 2.5,
      provider_latency_ms: null,
      nexus_latency_ms: null,
      first_token_at: null,
      attempt_id: null,
      attempt_status: null,
      attempt_http_status: null,
      attempt_started_at: null,
      attempt_completed_at: null,
    });
  });

  it('records a call refused after its admission read it with the model and the lease it named', () => {
    const row = invocationRecord(opened, read, {
      upstream: false,
      status: 'REJECTED',
      errorCode: 'rate_limited',
      errorMessage: 'x'.repeat(5000),
      completedAt: at(5),
      totalLatencyMs: 5,
    });
    expect(row).toMatchObject({
      requested_model: 'gpt-test',
      streamed: true,
      lease_id: read.leaseId,
      metering_status: 'metered',
      attempt_id: null,
      // An error message is kept up to its length limit.
      error_message: 'x'.repeat(1000),
    });
  });

  it('records an answered stream with its attempt, latencies and times to first token', () => {
    const row = invocationRecord(opened, read, answered);
    expect(row).toMatchObject({
      status: 'SUCCEEDED',
      quota_units: 42n,
      error_code: null,
      total_latency_ms: 900,
      provider_latency_ms: 780,
      nexus_latency_ms: 120,
      total_ttft_ms: 320,
      provider_ttft_ms: 200,
      nexus_ttft_ms: 120,
      first_token_at: at(320),
      attempt_id: answered.attemptId,
      attempt_upstream_model: 'gpt-test-2026-01-01',
      attempt_status: 'SUCCEEDED',
      attempt_http_status: 200,
      attempt_error_code: null,
      attempt_started_at: at(100),
      attempt_first_token_at: at(300),
      attempt_completed_at: at(900),
      attempt_duration_ms: 780,
    });
  });

  it("records the requested model as the attempt's when the provider reported none, and no first token without one", () => {
    const row = invocationRecord(opened, read, { ...answered, upstreamModel: '', providerTtftMs: null, totalTtftMs: null });
    expect(row).toMatchObject({
      attempt_upstream_model: 'gpt-test',
      first_token_at: null,
      attempt_first_token_at: null,
      nexus_ttft_ms: null,
    });
  });

  it('makes a call under way the snapshot of its loss: FAILED gateway_lost, its provider latency unknown', () => {
    const row = invocationRecord(opened, read, {
      ...answered,
      status: 'FAILED',
      errorCode: 'gateway_lost',
      attemptStatus: 'ABORTED',
      upstreamModel: null,
      providerLatencyMs: null,
      providerTtftMs: null,
      totalTtftMs: null,
    });
    expect(row).toMatchObject({
      status: 'FAILED',
      error_code: 'gateway_lost',
      attempt_error_code: 'gateway_lost',
      attempt_status: 'ABORTED',
      attempt_upstream_model: 'gpt-test',
      provider_latency_ms: null,
      nexus_latency_ms: null,
      quota_units: 42n,
    });
  });

  it('keeps model names and response ids storable (bounded, without NUL)', () => {
    const long = 'm'.repeat(1000);
    const row = invocationRecord(
      opened,
      { ...read, requestedModel: `a\u0000b${long}` },
      { ...answered, upstreamModel: long, upstreamResponseId: long },
    );
    expect(row.requested_model).not.toContain('\u0000');
    expect(row.requested_model.length).toBeLessThanOrEqual(256);
    expect(row.attempt_upstream_model!.length).toBeLessThanOrEqual(256);
    expect(row.upstream_response_id!.length).toBeLessThanOrEqual(256);
  });

  it('is pure: the same values make the same row, and none of them is changed', () => {
    const values = JSON.stringify([opened, read, answered], (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
    expect(invocationRecord(opened, read, answered)).toEqual(invocationRecord(opened, read, answered));
    expect(JSON.stringify([opened, read, answered], (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v))).toBe(values);
  });
});
