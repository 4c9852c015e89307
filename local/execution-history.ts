import type { StateMachine } from 'aws-local-stepfunctions';

/** An event of aws-local-stepfunctions' log, which the library does not export by name. */
type LibraryEvent = ReturnType<StateMachine['run']>['eventLogs'] extends AsyncIterable<infer E> ? E : never;

/** One event of `GetExecutionHistory`, as the AWS JSON protocol spells it (timestamps in epoch seconds). */
export interface HistoryEvent {
  readonly id: number;
  readonly previousEventId: number;
  readonly timestamp: number;
  readonly type: string;
  readonly [details: string]: unknown;
}

/** The most events kept per execution; AWS stops an execution at 25,000. */
const MAX_EVENTS = 25_000;

const json = (value: unknown) => JSON.stringify(value ?? null);
const text = (value: unknown) => (typeof value === 'string' ? value : json(value));

/**
 * The `type` and details of the history event AWS records for one library event, or undefined for
 * the library's own bookkeeping (retries and catches show in AWS as the failure and the next state).
 */
function describe(event: LibraryEvent): { type: string; details: Record<string, unknown> } | undefined {
  switch (event.type) {
    case 'ExecutionStarted':
      return { type: 'ExecutionStarted', details: { executionStartedEventDetails: { input: json(event.input) } } };
    case 'ExecutionSucceeded':
      return {
        type: 'ExecutionSucceeded',
        details: { executionSucceededEventDetails: { output: json(event.output) } },
      };
    case 'ExecutionFailed':
      return {
        type: 'ExecutionFailed',
        details: { executionFailedEventDetails: { error: event.Error, cause: text(event.Cause) } },
      };
    case 'ExecutionAborted':
      return { type: 'ExecutionAborted', details: { executionAbortedEventDetails: {} } };
    case 'ExecutionTimeout':
      return { type: 'ExecutionTimedOut', details: { executionTimedOutEventDetails: {} } };
    case 'StateEntered':
      return {
        type: `${event.state.type}StateEntered`,
        details: { stateEnteredEventDetails: { name: event.state.name, input: json(event.state.input) } },
      };
    case 'StateExited':
      return {
        type: `${event.state.type}StateExited`,
        details: { stateExitedEventDetails: { name: event.state.name, output: json(event.state.output) } },
      };
    case 'StateFailed':
      return event.state.type === 'Task'
        ? {
            type: 'TaskFailed',
            details: {
              taskFailedEventDetails: {
                resourceType: 'lambda',
                resource: event.state.name,
                error: event.Error,
                cause: text(event.Cause),
              },
            },
          }
        : undefined;
    default:
      return undefined;
  }
}

/** The history of one execution, numbered as AWS numbers it. */
export class ExecutionHistory {
  private readonly events: HistoryEvent[] = [];

  /** Records a library event as AWS would, numbered after the last. */
  record(event: LibraryEvent): void {
    const described = describe(event);
    if (!described || this.events.length >= MAX_EVENTS) return;
    const id = this.events.length + 1;
    this.events.push({
      id,
      previousEventId: id - 1,
      timestamp: event.timestamp / 1000,
      type: described.type,
      ...described.details,
    });
  }

  /** A page of `GetExecutionHistory`: `nextToken` is the offset of the next page. */
  page(options: { reverseOrder?: boolean; maxResults?: number; nextToken?: string; includeExecutionData?: boolean }) {
    const ordered = options.reverseOrder ? [...this.events].reverse() : this.events;
    const max = options.maxResults && options.maxResults > 0 ? Math.min(options.maxResults, 1000) : 1000;
    const offset = options.nextToken ? Number(options.nextToken) : 0;
    const slice = ordered.slice(offset, offset + max);
    const events = options.includeExecutionData === false ? slice.map(withoutData) : slice;
    return { events, ...(offset + max < ordered.length && { nextToken: String(offset + max) }) };
  }
}

/** An event without its input and output, as AWS answers with `includeExecutionData: false`. */
function withoutData(event: HistoryEvent): HistoryEvent {
  return Object.fromEntries(
    Object.entries(event).map(([key, value]) => {
      if (!key.endsWith('EventDetails') || typeof value !== 'object' || value === null) return [key, value];
      const { input: _input, output: _output, ...rest } = value as Record<string, unknown>;
      return [key, rest];
    }),
  ) as HistoryEvent;
}
