import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { DynamoDBRecord } from 'aws-lambda';
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { type RunEvent, runEventSchema } from '../../domain/events.js';

/** One event the event log's stream carried, with its stream position (what a mapping retries from). */
export interface StreamedEvent {
  readonly event: RunEvent;
  readonly position: string;
}

/**
 * The events newly appended to the event log, parsed from the stream's records in order. A record
 * that is not a new event (an update, a removal) is left out, and so is one whose image is not an
 * event, reported through `invalid` so it is not lost silently.
 */
export function appendedEvents(
  records: readonly DynamoDBRecord[],
  invalid: (position: string, message: string) => void = () => undefined,
  /** The event types the caller acts on; others are left out before they are parsed. @default all */
  wanted: (type: string) => boolean = () => true,
): StreamedEvent[] {
  return records.flatMap((record): StreamedEvent[] => {
    const image = record.dynamodb?.NewImage;
    const position = record.dynamodb?.SequenceNumber ?? '';
    if (record.eventName !== 'INSERT' || !image) return [];
    const type = image.type?.S;
    if (type !== undefined && !wanted(type)) return [];
    let item: unknown;
    try {
      // The Lambda event types and the SDK's describe the same wire shape under two names.
      item = unmarshall(withEmptyMaps(image as Record<string, AttributeValue>));
    } catch (error) {
      invalid(position, (error as Error).message);
      return [];
    }
    const parsed = runEventSchema.safeParse(item);
    if (!parsed.success) {
      invalid(position, parsed.error.issues[0]?.message ?? 'not an event');
      return [];
    }
    return [{ event: parsed.data, position }];
  });
}

/**
 * An empty map can reach a stream record as a value with no type at all (`{}` where `{"M": {}}`
 * was written: DynamoDB Local's stream does this); it is read back as the empty map it was.
 */
function withEmptyMaps(image: Record<string, AttributeValue>): Record<string, AttributeValue> {
  const fix = (value: AttributeValue): AttributeValue => {
    if (Object.keys(value).length === 0) return { M: {} };
    if (value.M) return { M: withEmptyMaps(value.M) };
    if (value.L) return { L: value.L.map(fix) };
    return value;
  };
  return Object.fromEntries(Object.entries(image).map(([key, value]) => [key, fix(value)]));
}
