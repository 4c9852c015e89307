import { createSocket } from 'node:dgram';
import { appendFileSync } from 'node:fs';
import type { SpanRecord, SpanSink } from './tracing.js';

/** Appends each span as one JSON line (the local stack's `.capstan/traces.jsonl`). */
export function fileSpanSink(path: string): SpanSink {
  return (span) => appendFileSync(path, `${JSON.stringify(span)}\n`);
}

/**
 * Sends each span as an X-Ray segment to the daemon (the sidecar of a Fargate task, listening on
 * UDP `host:port`). The worker spans are subsegments-as-segments with a `parent_id`, the way the
 * X-Ray SDKs report work that continues a trace from another service.
 */
export function xrayDaemonSink(address: string): SpanSink {
  const [host = '127.0.0.1', port = '2000'] = address.split(':');
  const socket = createSocket('udp4');
  socket.unref();
  return (span: SpanRecord) => {
    const segment = {
      name: span.name,
      id: span.spanId,
      trace_id: span.traceId,
      ...(span.parentId && { parent_id: span.parentId }),
      start_time: span.startTime,
      end_time: span.endTime,
      ...(span.error !== undefined && { fault: true }),
      annotations: span.attributes,
      metadata: { service: { name: span.service } },
    };
    const packet = Buffer.from(`{"format":"json","version":1}\n${JSON.stringify(segment)}`);
    socket.send(packet, Number(port), host);
  };
}
