import { type EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import type { LifecycleBus } from '../app/lifecycle.js';

/** Lifecycle events to EventBridge (`source: capstan`); without a bus name nothing is sent. */
export function makeEventBridgeLifecycleBus(client: EventBridgeClient, busName: string | undefined): LifecycleBus {
  return {
    async publish(messages) {
      if (!busName || messages.length === 0) return messages.length;
      const { Entries = [] } = await client.send(
        new PutEventsCommand({
          Entries: messages.map((m) => ({
            EventBusName: busName,
            Source: 'capstan',
            DetailType: m.detailType,
            Detail: JSON.stringify(m.detail),
          })),
        }),
      );
      // Accepted entries up to the first refused one: order matters to a ticket system.
      const firstFailed = Entries.findIndex((entry) => entry.ErrorCode !== undefined);
      return firstFailed === -1 ? messages.length : firstFailed;
    },
  };
}
