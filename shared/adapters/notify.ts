import { type EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';

/** Where alerts go: the lifecycle bus and a Slack-compatible incoming webhook, each optional. */
export interface NotifyTargets {
  readonly eventBridge: EventBridgeClient;
  /** The bus lifecycle events go out on; without one, nothing goes to EventBridge. */
  readonly busName?: string;
  /** A Slack-compatible incoming webhook; without one, nothing is posted. */
  readonly webhookUrl?: string;
  readonly timeoutMs?: number;
}

/** One alert: an EventBridge detail-type and detail, and the text posted to the webhook. */
export interface Alert {
  readonly detailType: string;
  readonly detail: Readonly<Record<string, unknown>>;
  readonly text: string;
}

/**
 * Sends an alert to the bus and the webhook at once. Resolves to the messages of the deliveries
 * that failed, never throws: whoever raised the alert has already recorded it in the event log.
 */
export async function deliverAlert(targets: NotifyTargets, alert: Alert): Promise<string[]> {
  const deliveries: Array<Promise<unknown>> = [];
  if (targets.busName)
    deliveries.push(
      targets.eventBridge.send(
        new PutEventsCommand({
          Entries: [
            {
              EventBusName: targets.busName,
              Source: 'capstan',
              DetailType: alert.detailType,
              Detail: JSON.stringify(alert.detail),
            },
          ],
        }),
      ),
    );
  if (targets.webhookUrl)
    deliveries.push(
      fetch(targets.webhookUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ text: alert.text }),
        signal: AbortSignal.timeout(targets.timeoutMs ?? 5000),
      }).then((response) => {
        if (!response.ok) throw new Error(`the webhook answered ${response.status}`);
      }),
    );
  const results = await Promise.allSettled(deliveries);
  return results.flatMap((r) => (r.status === 'rejected' ? [(r.reason as Error).message] : []));
}
