import type { Message, MessageAttributeValue } from '@aws-sdk/client-sqs';
import { currentTraceHeader } from '../../observability/tracing.js';

/** The message attribute that carries the sender's trace header to the receiver. */
export const TRACE_ATTRIBUTE = 'X-Amzn-Trace-Id';

/** The message attributes of a message sent inside a span: its trace header, so the trace crosses the queue. */
export function traceAttributes(): { MessageAttributes?: Record<string, MessageAttributeValue> } {
  const header = currentTraceHeader();
  return header === undefined
    ? {}
    : { MessageAttributes: { [TRACE_ATTRIBUTE]: { DataType: 'String', StringValue: header } } };
}

/** The trace header a received message carries, if any. */
export function traceHeaderOf(message: Pick<Message, 'MessageAttributes'>): string | undefined {
  return message.MessageAttributes?.[TRACE_ATTRIBUTE]?.StringValue;
}
