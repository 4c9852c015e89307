import type { Logger } from '@aws-lambda-powertools/logger';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import { captureLambdaHandler } from '@aws-lambda-powertools/tracer/middleware';
import middy from '@middy/core';
import type { Context } from 'aws-lambda';
import { traceFile } from '../shared/config.js';
import { type LogContext, logContextOf, makeLogger } from '../shared/observability/logger.js';
import { flushMetrics, setMetricsService } from '../shared/observability/metrics.js';
import { fileSpanSink } from '../shared/observability/span-sinks.js';
import { tracer } from '../shared/observability/tracer.js';
import { configureTracing, withSpan } from '../shared/observability/tracing.js';

let tracingConfigured = false;
/** Locally the stack names a file for spans; in Lambda, Powertools Tracer sends them to X-Ray. Read at the first invocation. */
function configureLocalSpans(): void {
  if (tracingConfigured) return;
  tracingConfigured = true;
  const file = traceFile();
  if (file !== undefined) configureTracing({ sink: fileSpanSink(file), service: 'capstan-lambda' });
}

/** The path and authorizer parts of a REST or WebSocket event that name a run, an approval or a tenant. */
function restContextOf(event: Record<string, unknown>): LogContext {
  const path = event.pathParameters as Record<string, string | undefined> | null | undefined;
  const resource = typeof event.resource === 'string' ? event.resource : '';
  const requestContext = event.requestContext as { authorizer?: { tenantId?: unknown } } | undefined;
  const tenantId = requestContext?.authorizer?.tenantId;
  return {
    ...(typeof tenantId === 'string' && { tenantId }),
    ...(resource.startsWith('/v1/runs/{id}') && path?.id && { runId: path.id }),
    ...(path?.approvalId && { approvalId: path.approvalId }),
  };
}

/** Every structured field an invocation's event names: a task input, its decision, a REST path. */
export function invocationContext(event: unknown): LogContext {
  if (event === null || typeof event !== 'object') return {};
  const record = event as Record<string, unknown>;
  return { ...restContextOf(record), ...logContextOf(record.decision), ...logContextOf(record) };
}

type LambdaHandler<E, R> = (event: E, context: Context) => Promise<R>;

/** The handlers built by {@link lambdaTelemetry}, so a test can prove every deployed one is. */
const observed = new WeakSet<object>();

/** Whether a module's `handler` was built by {@link lambdaTelemetry}'s `observe`. */
export function isObserved(handler: unknown): boolean {
  return typeof handler === 'function' && observed.has(handler);
}

/**
 * One function's telemetry: its logger, and `observe`, which wraps its handler in the one
 * middleware order every Capstan Lambda has: the Lambda context and the event's fields on every
 * log line (reset per invocation), an X-Ray segment for the invocation (SDK calls inside it are
 * subsegments), a span named for the function, and the invocation's metrics flushed once at its end.
 */
export function lambdaTelemetry(service: string): {
  logger: Logger;
  observe: <E, R>(handler: LambdaHandler<E, R>) => middy.MiddyfiedHandler<E, R, Error, Context>;
} {
  const logger = makeLogger(service);
  const observe = <E, R>(handler: LambdaHandler<E, R>) => {
    const wrapped = middy<E, R, Error, Context>()
      .use(injectLambdaContext(logger, { resetKeys: true }))
      .use(tracer ? [captureLambdaHandler(tracer, { captureResponse: false })] : [])
      .use({
        before: (request) => {
          configureLocalSpans();
          setMetricsService(service);
          logger.appendKeys({ ...invocationContext(request.event) });
        },
        after: () => flushMetrics(),
        onError: () => flushMetrics(),
      })
      .handler((event, context) => {
        const fields = invocationContext(event);
        return withSpan(context.functionName, { attributes: { ...fields, service } }, () => handler(event, context));
      });
    observed.add(wrapped);
    return wrapped;
  };
  return { logger, observe };
}
