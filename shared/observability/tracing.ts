import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';

/**
 * Spans in the X-Ray model: a trace id (`1-<8 hex seconds>-<24 hex>`), 16-hex span ids, and a
 * trace header (`Root=...;Parent=...;Sampled=1`) that crosses process boundaries. Lambda spans
 * also go to X-Ray through Powertools Tracer; these records are what the worker exports and what
 * the local stack writes to a file.
 */
export interface SpanRecord {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentId?: string;
  readonly name: string;
  readonly service: string;
  readonly startTime: number;
  readonly endTime: number;
  readonly attributes: Readonly<Record<string, string | number | boolean>>;
  readonly error?: string;
}

/** Where finished spans go: a file locally, the X-Ray daemon on Fargate, nowhere by default. */
export type SpanSink = (span: SpanRecord) => void;

interface ActiveSpan {
  readonly traceId: string;
  readonly spanId: string;
}

const active = new AsyncLocalStorage<ActiveSpan>();
let sink: SpanSink = () => undefined;
let service = 'capstan';

/** Sets where spans go and which service they name. */
export function configureTracing(options: { readonly sink: SpanSink; readonly service: string }): void {
  sink = options.sink;
  service = options.service;
}

const hex = (bytes: number) => randomBytes(bytes).toString('hex');
const newTraceId = () =>
  `1-${Math.floor(Date.now() / 1000)
    .toString(16)
    .padStart(8, '0')}-${hex(12)}`;

/** The X-Ray trace header of the active span, for a message or request that continues the trace. */
export function currentTraceHeader(): string | undefined {
  const span = active.getStore();
  return span ? `Root=${span.traceId};Parent=${span.spanId};Sampled=1` : undefined;
}

/** The trace and parent span a header names; undefined for a missing or malformed header. */
export function parseTraceHeader(header: string | undefined): ActiveSpan | undefined {
  if (!header) return undefined;
  const fields = Object.fromEntries(
    header.split(';').map((part) => {
      const [key = '', value = ''] = part.trim().split('=');
      return [key, value];
    }),
  );
  const root = fields.Root;
  const parent = fields.Parent;
  if (!root || !/^1-[0-9a-f]{8}-[0-9a-f]{24}$/.test(root) || !parent || !/^[0-9a-f]{16}$/.test(parent))
    return undefined;
  return { traceId: root, spanId: parent };
}

export interface SpanOptions {
  readonly attributes?: Readonly<Record<string, string | number | boolean | undefined>>;
  /** Continue the trace this header names instead of the active span's (a message from a queue). */
  readonly parentHeader?: string;
}

/**
 * Runs `work` inside a new span, a child of the active span (or of `parentHeader`), and records
 * it when `work` settles; a rejection is recorded as the span's error and passed on.
 */
export async function withSpan<T>(name: string, options: SpanOptions, work: () => Promise<T>): Promise<T> {
  const parent = parseTraceHeader(options.parentHeader) ?? active.getStore();
  const span: ActiveSpan = { traceId: parent?.traceId ?? newTraceId(), spanId: hex(8) };
  const startTime = Date.now() / 1000;
  const attributes = Object.fromEntries(
    Object.entries(options.attributes ?? {}).filter(
      (entry): entry is [string, string | number | boolean] => entry[1] !== undefined,
    ),
  );
  const finish = (error?: unknown) => {
    try {
      sink({
        ...span,
        ...(parent && { parentId: parent.spanId }),
        name,
        service,
        startTime,
        endTime: Date.now() / 1000,
        attributes,
        ...(error !== undefined && { error: error instanceof Error ? error.name : 'Error' }),
      });
    } catch {
      // A span that cannot be exported never fails the work it measured.
    }
  };
  try {
    const result = await active.run(span, work);
    finish();
    return result;
  } catch (error) {
    finish(error);
    throw error;
  }
}

/**
 * Records a span that has already ended, a child of the active span: a wait measured from stored
 * times (an approval from its request to its resolution), which no one process lived through.
 */
export function recordSpan(
  name: string,
  times: { readonly start: Date; readonly end: Date },
  attributes: Readonly<Record<string, string | number | boolean>> = {},
): void {
  const parent = active.getStore();
  try {
    sink({
      traceId: parent?.traceId ?? newTraceId(),
      spanId: hex(8),
      ...(parent && { parentId: parent.spanId }),
      name,
      service,
      startTime: times.start.getTime() / 1000,
      endTime: times.end.getTime() / 1000,
      attributes,
    });
  } catch {
    // A span that cannot be exported never fails the work it describes.
  }
}
