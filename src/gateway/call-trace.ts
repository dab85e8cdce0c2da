/**
 * A gateway call's spans, when traces are on (src/observability/tracing.ts): the call's own (a child of the
 * request's traceparent, if it came with one), and under it the admission, the upstream call (whose
 * context goes to the upstream as its traceparent) and the record (ended by the recorder once the
 * record is safe). Attributes follow the OpenTelemetry GenAI conventions where they fit; ids, model
 * names, token counts and statuses only, never a key, a header or a body.
 */
import { SpanKind, SpanStatusCode, trace, type Context, type Span, type Tracer } from '@opentelemetry/api';
import type { EarlierAttempt, InvocationRow } from '../domain/invocations/invocation-types.js';
import { parentContext, traceparentOf } from '../observability/tracing.js';
import type { Protocol } from '../protocols/protocol.js';
import type { Inspector, PreparedCall } from '../protocols/inspectors.js';

/** What a call was charged for, as the trace reads it. */
interface Charged {
  units: bigint;
  inputTokens: bigint;
  cachedInputTokens: bigint;
  outputTokens: bigint;
}

export class CallTrace {
  private readonly span: Span;
  private readonly context: Context;
  private upstream: Span | undefined;
  /** The `gen_ai.system` of the connection's protocol (its table's telemetry). */
  private system: string | undefined;
  private inspector: Inspector | undefined;

  constructor(
    private readonly tracer: Tracer,
    operationId: string,
    method: string,
    path: string,
    requestId: string,
    traceparent: string | undefined,
  ) {
    const parent = parentContext(traceparent);
    this.span = tracer.startSpan(
      operationId,
      {
        kind: SpanKind.SERVER,
        attributes: { 'http.request.method': method, 'url.path': path, 'nexus.operation_id': operationId, 'nexus.request_id': requestId },
      },
      parent,
    );
    this.context = trace.setSpan(parent, this.span);
  }

  /** The trace id of the call (its traceparent's when it came with one): the invocation records it. */
  get traceId(): string {
    return this.span.spanContext().traceId;
  }

  /** The quota admission's span (a metered call's bound, admitted on the lease or refused). */
  admission(): Span {
    return this.tracer.startSpan('admission', { kind: SpanKind.INTERNAL }, this.context);
  }

  /** The upstream call begins: its span, and the traceparent to send with it. */
  upstreamStarted(protocol: Protocol, inspector: Inspector | undefined, method: string, base: URL): string {
    const system = protocol.telemetry.system;
    this.system = system;
    this.inspector = inspector;
    const port = base.port ? Number(base.port) : base.protocol === 'https:' ? 443 : 80;
    this.upstream = this.tracer.startSpan(
      inspector ? inspector.operation : method,
      {
        kind: SpanKind.CLIENT,
        attributes: {
          'http.request.method': method,
          'server.address': base.hostname,
          'server.port': port,
          'gen_ai.system': system,
          'gen_ai.provider.name': system,
          ...(inspector ? { 'gen_ai.operation.name': inspector.operation } : {}),
        },
      },
      this.context,
    );
    return traceparentOf(this.upstream.spanContext());
  }

  /** A route's attempt failed before any byte reached the client: its span ends, with why; the next attempt gets its own. */
  attemptFailed(attempt: EarlierAttempt): void {
    const upstream = this.upstream;
    if (!upstream) return;
    this.upstream = undefined;
    upstream.setAttributes({
      'nexus.attempt': attempt.sequence,
      'nexus.connection_id': attempt.providerConnectionId,
      'gen_ai.request.model': attempt.upstreamModel,
      'error.type': attempt.errorCode ?? String(attempt.httpStatus),
    });
    if (attempt.httpStatus !== undefined) upstream.setAttribute('http.response.status_code', attempt.httpStatus);
    upstream.setStatus({ code: SpanStatusCode.ERROR, message: attempt.errorCode });
    upstream.end();
  }

  /**
   * The call is recorded (answered, or refused before its upstream call ended): the upstream and call spans
   * get their outcome and end; returns the record's span, which the recorder ends once the record is safe.
   */
  ended(invocation: Readonly<InvocationRow>, charged: Charged | null, httpStatus: number, prepared: PreparedCall | undefined): Span {
    const model = invocation.requested_model;
    const upstream = this.upstream;
    if (upstream) {
      if (this.inspector && model) upstream.updateName(`${this.inspector.operation} ${model}`);
      if (model) upstream.setAttribute('gen_ai.request.model', model);
      // An endpoint with output (an output cap): an embedding has none.
      if (prepared && this.inspector && this.inspector.capFields.length > 0)
        upstream.setAttribute('gen_ai.request.max_tokens', Number(prepared.outputBound));
      if (invocation.attempt_upstream_model) upstream.setAttribute('gen_ai.response.model', invocation.attempt_upstream_model);
      if (invocation.upstream_response_id) upstream.setAttribute('gen_ai.response.id', invocation.upstream_response_id);
      if (invocation.attempt_http_status !== null) upstream.setAttribute('http.response.status_code', invocation.attempt_http_status);
      if (charged) {
        upstream.setAttribute('gen_ai.usage.input_tokens', Number(charged.inputTokens));
        upstream.setAttribute('gen_ai.usage.cache_read.input_tokens', Number(charged.cachedInputTokens));
        upstream.setAttribute('gen_ai.usage.output_tokens', Number(charged.outputTokens));
      }
      if (invocation.attempt_status === null && invocation.error_code) {
        // Refused before its request went out (its upstream's address, say).
        upstream.setAttribute('error.type', invocation.error_code);
        upstream.setStatus({ code: SpanStatusCode.ERROR, message: invocation.error_code });
      } else if (invocation.attempt_error_code) {
        upstream.setAttribute('error.type', invocation.attempt_error_code);
        upstream.setStatus({ code: SpanStatusCode.ERROR, message: invocation.attempt_error_code });
      } else if (invocation.attempt_http_status !== null && invocation.attempt_http_status >= 400) {
        upstream.setAttribute('error.type', String(invocation.attempt_http_status));
        upstream.setStatus({ code: SpanStatusCode.ERROR });
      }
      upstream.end();
    }
    const span = this.span;
    span.setAttributes({
      'http.response.status_code': httpStatus,
      'nexus.workspace_id': invocation.workspace_id,
      'nexus.connection_id': invocation.provider_connection_id,
      'nexus.access_id': invocation.workspace_access_id,
      'nexus.invocation_id': invocation.id,
      'nexus.outcome': invocation.status,
      'nexus.metering_status': invocation.metering_status,
      'nexus.quota_units': Number(invocation.quota_units),
    });
    if (this.system) span.setAttribute('gen_ai.system', this.system);
    if (model) span.setAttribute('gen_ai.request.model', model);
    if (invocation.attempt_upstream_model) span.setAttribute('gen_ai.response.model', invocation.attempt_upstream_model);
    if (charged) {
      span.setAttribute('gen_ai.usage.input_tokens', Number(charged.inputTokens));
      span.setAttribute('gen_ai.usage.output_tokens', Number(charged.outputTokens));
      span.setAttribute('gen_ai.usage.cache_read.input_tokens', Number(charged.cachedInputTokens));
    }
    if (invocation.error_code) span.setAttribute('error.type', invocation.error_code);
    if (httpStatus >= 500)
      span.setStatus({ code: SpanStatusCode.ERROR, ...(invocation.error_code ? { message: invocation.error_code } : {}) });
    span.end();
    return this.tracer.startSpan('record', { kind: SpanKind.INTERNAL, attributes: { 'nexus.invocation_id': invocation.id } }, this.context);
  }

  /** Refused before the key and connection were known (no call to record). */
  refusedEarly(httpStatus: number, errorCode: string): void {
    this.span.setAttributes({ 'http.response.status_code': httpStatus, 'error.type': errorCode });
    if (httpStatus >= 500) this.span.setStatus({ code: SpanStatusCode.ERROR, message: errorCode });
    this.span.end();
  }
}

/** A span that ended in an error (the admission's refusal, say). */
export function failed(span: Span, err: unknown): void {
  const code = (err as { code?: unknown }).code;
  span.setAttribute('error.type', typeof code === 'string' ? code : ((err as Error).name ?? 'Error'));
  span.setStatus({ code: SpanStatusCode.ERROR, ...(typeof code === 'string' ? { message: code } : {}) });
}
