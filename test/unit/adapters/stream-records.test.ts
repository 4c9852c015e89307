import { marshall } from '@aws-sdk/util-dynamodb';
import type { DynamoDBRecord } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { appendedEvents } from '../../../shared/adapters/dynamodb/stream-records.js';
import { chainEvents, EMPTY_CHAIN } from '../../../shared/domain/events.js';

const { events } = chainEvents(EMPTY_CHAIN, { runId: 'run-1', tenantId: 't' }, [
  {
    eventId: 'e1',
    type: 'run.created',
    timestamp: '2026-01-01T00:00:00.000Z',
    payload: { runbookId: 'hello', runbookVersion: 1, ticket: { id: 'INC-1', source: 'jira' } },
    meta: {},
  },
]);

const record = (eventName: DynamoDBRecord['eventName'], image: object, position: string): DynamoDBRecord => ({
  eventName,
  dynamodb: {
    NewImage: marshall(image) as NonNullable<DynamoDBRecord['dynamodb']>['NewImage'],
    SequenceNumber: position,
  },
});

describe('the event log stream records', () => {
  it('parses each new event with its stream position, payload included', () => {
    const [event] = events;
    expect(appendedEvents([record('INSERT', event!, 'p1')])).toEqual([{ event, position: 'p1' }]);
  });

  it('reads a value with no type as the empty map it was written as', () => {
    const image = marshall({ ...events[0]!, payload: { output: {} }, meta: {} }) as Record<string, object>;
    // DynamoDB Local's stream: an empty map arrives without its type.
    const payload = image.payload as { M: Record<string, object> };
    payload.M.output = {};
    image.meta = {};
    const [found] = appendedEvents([
      { eventName: 'INSERT', dynamodb: { NewImage: image as never, SequenceNumber: 'p1' } },
    ]);
    expect(found?.event).toMatchObject({ payload: { output: {} }, meta: {} });
  });

  it('leaves out changes that are not new events, and reports an image that is not an event', () => {
    const invalid: string[] = [];
    const found = appendedEvents(
      [record('MODIFY', events[0]!, 'p1'), record('INSERT', { runId: 'run-1', seq: 'x' }, 'p2')],
      (position) => invalid.push(position),
    );
    expect(found).toEqual([]);
    expect(invalid).toEqual(['p2']);
  });

  it('leaves out the event types the caller does not act on, before parsing them', () => {
    const invalid: string[] = [];
    const found = appendedEvents(
      [
        record('INSERT', { ...events[0]!, type: 'step.output', seq: 'not a number' }, 'p1'),
        record('INSERT', events[0]!, 'p2'),
      ],
      (position) => invalid.push(position),
      (type) => type === 'run.created',
    );
    expect(found.map((f) => f.position)).toEqual(['p2']);
    expect(invalid).toEqual([]);
  });
});
