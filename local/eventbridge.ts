import { appendFileSync } from 'node:fs';
import { z } from 'zod';
import { AwsServiceError, type JsonService, startJsonService } from './aws-json.js';

const putEventsInput = z.object({
  Entries: z
    .array(
      z.object({
        Source: z.string().min(1),
        DetailType: z.string().min(1),
        Detail: z.string(),
        EventBusName: z.string().optional(),
        Resources: z.array(z.string()).optional(),
      }),
    )
    .min(1)
    .max(10),
});

export interface PublishedEvent {
  readonly id: string;
  readonly source: string;
  readonly detailType: string;
  readonly detail: unknown;
  readonly eventBusName: string;
  readonly time: string;
}

export interface LocalEventBridgeOptions {
  readonly port: number;
  /** Every accepted event is appended here as one JSON line. */
  readonly logFile: string;
  readonly onEvent?: (event: PublishedEvent) => void;
}

/** A local EventBridge endpoint for PutEvents: events are kept in a JSON-lines file and passed on. */
export function startLocalEventBridge(options: LocalEventBridgeOptions): Promise<JsonService> {
  return startJsonService({
    port: options.port,
    targetPrefix: 'AWSEvents',
    operations: {
      PutEvents: (input) => {
        const parsed = putEventsInput.safeParse(input);
        if (!parsed.success) throw new AwsServiceError('ValidationException', parsed.error.issues[0]?.message ?? '');
        const entries = parsed.data.Entries.map((entry) => {
          let detail: unknown;
          try {
            detail = JSON.parse(entry.Detail);
          } catch {
            return { ErrorCode: 'MalformedDetail', ErrorMessage: 'Detail is not valid JSON' };
          }
          const event: PublishedEvent = {
            id: crypto.randomUUID(),
            source: entry.Source,
            detailType: entry.DetailType,
            detail,
            eventBusName: entry.EventBusName ?? 'default',
            time: new Date().toISOString(),
          };
          appendFileSync(options.logFile, `${JSON.stringify(event)}\n`);
          options.onEvent?.(event);
          return { EventId: event.id };
        });
        return { FailedEntryCount: entries.filter((e) => 'ErrorCode' in e).length, Entries: entries };
      },
    },
  });
}
