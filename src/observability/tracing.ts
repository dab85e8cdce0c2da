/**
 * OpenTelemetry traces, off unless the configuration names an exporter (src/config.ts, OTEL_*). Off,
 * the SDK is never loaded and nothing is traced: the code that traces holds no tracer and skips its
 * spans. On, spans go through a batch processor to OTLP/HTTP (JSON) or the console.
 *
 * The provider is not registered globally: each app holds its own tracer (tests run several apps in
 * one process), and the context is passed by hand (a W3C traceparent in, one out to the upstream).
 */
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  isSpanContextValid,
  trace,
  type Context,
  type SpanContext,
  type Tracer,
} from '@opentelemetry/api';
import type { Config } from '../config.js';

export type { Tracer };

export interface Tracing {
  tracer: Tracer;
  /** Exports the spans still buffered and stops. */
  shutdown(): Promise<void>;
}

type TracingConfig = NonNullable<Config['tracing']>;

/** The SDK, loaded now, with the configured exporter and sampler; undefined when traces are off. */
export async function startTracing(config: Config['tracing'], version: string): Promise<Tracing | undefined> {
  if (!config) return undefined;
  const [sdk, { resourceFromAttributes }] = await Promise.all([
    import('@opentelemetry/sdk-trace-base'),
    import('@opentelemetry/resources'),
  ]);
  let exporter;
  if (config.exporter === 'console') {
    exporter = new sdk.ConsoleSpanExporter();
  } else {
    const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-http');
    exporter = new OTLPTraceExporter({ url: config.endpoint, headers: { ...config.headers } });
  }
  const provider = new sdk.BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': config.serviceName, 'service.version': version }),
    sampler: samplerOf(sdk, config),
    spanProcessors: [new sdk.BatchSpanProcessor(exporter)],
  });
  return { tracer: provider.getTracer('nexus', version), shutdown: () => provider.shutdown() };
}

function samplerOf(sdk: typeof import('@opentelemetry/sdk-trace-base'), config: TracingConfig) {
  const root = config.sampler.endsWith('always_off')
    ? new sdk.AlwaysOffSampler()
    : config.sampler.endsWith('traceidratio')
      ? new sdk.TraceIdRatioBasedSampler(config.samplerRatio)
      : new sdk.AlwaysOnSampler();
  return config.sampler.startsWith('parentbased_') ? new sdk.ParentBasedSampler({ root }) : root;
}

const TRACEPARENT = /^[\da-f]{2}-([\da-f]{32})-([\da-f]{16})-([\da-f]{2})$/;

/** The trace id a W3C traceparent names, or null (none, or an invalid one). */
export function traceIdOf(traceparent: string | undefined): string | null {
  return traceparent === undefined ? null : (TRACEPARENT.exec(traceparent)?.[1] ?? null);
}

/** The remote parent a W3C traceparent names, as a context; the root context when it names none (or an invalid one). */
export function parentContext(traceparent: string | undefined): Context {
  const m = traceparent === undefined ? null : TRACEPARENT.exec(traceparent);
  if (!m) return ROOT_CONTEXT;
  const parent: SpanContext = { traceId: m[1]!, spanId: m[2]!, traceFlags: parseInt(m[3]!, 16) & 1, isRemote: true };
  return isSpanContextValid(parent) ? trace.setSpanContext(ROOT_CONTEXT, parent) : ROOT_CONTEXT;
}

/** The W3C traceparent that makes the receiver's spans children of this one. */
export function traceparentOf(context: SpanContext): string {
  return `00-${context.traceId}-${context.spanId}-${context.traceFlags & 1 ? '01' : '00'}`;
}

/**
 * An Admin API operation's span, made when its answer is finished (its start time given): these spans have
 * no children, and requests outside the contract (/metrics, /healthz scrapes) make none.
 */
export function operationSpan(
  tracer: Tracer,
  operation: { operationId: string; method: string; path: string; status: number; requestId: string; traceparent: string | undefined },
  startTime: number,
): void {
  const span = tracer.startSpan(
    operation.operationId,
    {
      kind: SpanKind.SERVER,
      startTime,
      attributes: {
        'http.request.method': operation.method,
        'url.path': operation.path,
        'http.response.status_code': operation.status,
        'nexus.operation_id': operation.operationId,
        'nexus.request_id': operation.requestId,
      },
    },
    parentContext(operation.traceparent),
  );
  if (operation.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
  span.end();
}
