// OpenTelemetry traces exported over OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT is set; a no-op object otherwise.
// Context lives in this object's own AsyncLocalStorage (no global provider or context manager), so several apps
// in one process (tests) keep separate traces.
import { AsyncLocalStorage } from 'node:async_hooks';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span, type Tracer } from '@opentelemetry/api';
import type * as OtlpHttp from '@opentelemetry/exporter-trace-otlp-http';
import type * as Resources from '@opentelemetry/resources';
import type * as SdkTrace from '@opentelemetry/sdk-trace';
import type { Knex } from 'knex';
import { createRequire } from 'node:module';

// The SDK and its exporter (~3 MB of heap) load only when tracing is on (synchronously: createTracing is).
const load = createRequire(import.meta.url);

export { SpanKind, SpanStatusCode };

export interface Tracing {
  readonly enabled: boolean;
  /** Runs `fn` in a child span of the current one (a root span when there is none). */
  span<T>(name: string, attributes: Attributes, fn: (span: Span) => Promise<T>, kind?: SpanKind): Promise<T>;
  /** Runs `fn` (and everything it awaits) inside a new root span that the caller ends. */
  startRoot<T>(name: string, attributes: Attributes, fn: (span: Span) => T, kind?: SpanKind): T;
  /** `{ traceId, spanId }` of the current span, for log lines. */
  currentIds(): { traceId: string; spanId: string } | undefined;
  /** Child spans for every query of this Knex instance issued inside a span. */
  watchKnex(db: Knex): void;
  flush(): Promise<void>;
  shutdown(): Promise<void>;
}

/** One shared non-recording span, so the no-op tracing allocates nothing per call. */
const NO_SPAN: Span = trace.wrapSpanContext({ traceId: '0'.repeat(32), spanId: '0'.repeat(16), traceFlags: 0 });

/** Tracing off: `span` calls `fn` directly. */
export const noTracing: Tracing = {
  enabled: false,
  span: (_name, _attributes, fn) => fn(NO_SPAN),
  startRoot: (_name, _attributes, fn) => fn(NO_SPAN),
  currentIds: () => undefined,
  watchKnex: () => {},
  flush: async () => {},
  shutdown: async () => {},
};

export function createTracing(options: { endpoint: string | null; serviceName: string; scheduledDelayMs?: number }): Tracing {
  if (!options.endpoint) return noTracing;
  const { OTLPTraceExporter } = load('@opentelemetry/exporter-trace-otlp-http') as typeof OtlpHttp;
  const { resourceFromAttributes } = load('@opentelemetry/resources') as typeof Resources;
  const { BatchSpanProcessor, TracerProvider } = load('@opentelemetry/sdk-trace') as typeof SdkTrace;
  const exporter = new OTLPTraceExporter({ url: `${options.endpoint.replace(/\/+$/, '')}/v1/traces` });
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ 'service.name': options.serviceName }),
    spanProcessors: [new BatchSpanProcessor({ exporter, scheduledDelayMillis: options.scheduledDelayMs ?? 1000 })],
  });
  const tracer: Tracer = provider.getTracer('agent-api');
  const storage = new AsyncLocalStorage<Context>();
  const current = (): Context => storage.getStore() ?? ROOT_CONTEXT;

  const startChild = (name: string, attributes: Attributes, kind: SpanKind) => tracer.startSpan(name, { kind, attributes }, current());

  return {
    enabled: true,
    async span(name, attributes, fn, kind = SpanKind.INTERNAL) {
      const span = startChild(name, attributes, kind);
      try {
        return await storage.run(trace.setSpan(current(), span), () => fn(span));
      } catch (err) {
        span.recordException(err as Error);
        span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
        throw err;
      } finally {
        span.end();
      }
    },
    startRoot(name, attributes, fn, kind = SpanKind.SERVER) {
      const span = tracer.startSpan(name, { kind, attributes, root: true });
      return storage.run(trace.setSpan(ROOT_CONTEXT, span), () => fn(span));
    },
    currentIds() {
      const ctx = trace.getSpan(current())?.spanContext();
      return ctx ? { traceId: ctx.traceId, spanId: ctx.spanId } : undefined;
    },
    watchKnex(db) {
      // Knex emits 'query' in the caller's async context, so the current span is the query's parent.
      const open = new Map<string, Span>();
      db.on('query', (q: { __knexQueryUid?: string; sql?: string; method?: string }) => {
        if (!q.__knexQueryUid || !storage.getStore()) return;
        const span = startChild(`db ${q.method ?? 'query'}`, { 'db.system.name': 'postgresql', 'db.query.text': q.sql ?? '', 'db.operation.name': q.method ?? '' }, SpanKind.CLIENT);
        open.set(q.__knexQueryUid, span);
      });
      const end = (err: { message?: string } | null, q: { __knexQueryUid?: string }) => {
        const span = q?.__knexQueryUid ? open.get(q.__knexQueryUid) : undefined;
        if (!span) return;
        open.delete(q.__knexQueryUid!);
        if (err) span.setStatus({ code: SpanStatusCode.ERROR, message: err.message ?? 'query failed' });
        span.end();
      };
      db.on('query-response', (_response: unknown, q: { __knexQueryUid?: string }) => end(null, q));
      db.on('query-error', (err: { message?: string }, q: { __knexQueryUid?: string }) => end(err, q));
    },
    flush: () => provider.forceFlush(),
    shutdown: () => provider.shutdown(),
  };
}
