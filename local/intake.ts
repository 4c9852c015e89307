import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { dynamoDbClientAt } from '../shared/adapters/aws-clients.js';
import { makeDynamoRunbookStore } from '../shared/adapters/dynamodb/runbook-store.js';
import { checkRoutes, readRoutes, runbookNamesIn } from '../shared/resources/intake-routes.js';
import type { PublishedEvent } from './eventbridge.js';

const ROOT = join(import.meta.dirname, '..');

/**
 * Checks the local routing document (`CAPSTAN_ROUTES`: a file, or the JSON itself) at start and
 * answers it as JSON text for the handlers. A rule's runbook must be registered in the rule's
 * tenant, or be one of `examples/runbooks/` (a fresh stack has registered nothing yet; such a
 * rule starts runs once the example is pushed, and until then its tickets are recorded as
 * `unknown_runbook`). Anything else fails the start.
 */
export async function prepareRoutes(
  value: string | undefined,
  options: { dynamoEndpoint: string; stateTable: string; defaultTenant: string },
): Promise<string | undefined> {
  if (value === undefined || value.trim() === '') return undefined;
  const routes = readRoutes(value);
  const examples = runbookNamesIn(join(ROOT, 'examples', 'runbooks'));
  const client = DynamoDBDocumentClient.from(dynamoDbClientAt(options.dynamoEndpoint));
  try {
    const runbooks = makeDynamoRunbookStore(client, options.stateTable);
    const registered = new Set<string>();
    for (const rule of routes.rules) {
      const tenant = rule.tenant ?? options.defaultTenant;
      if (await runbooks.head(tenant, rule.runbook)) registered.add(`${tenant}\n${rule.runbook}`);
    }
    checkRoutes(
      routes,
      (tenant, runbook) => examples.has(runbook) || registered.has(`${tenant}\n${runbook}`),
      options.defaultTenant,
    );
  } finally {
    client.destroy();
  }
  return JSON.stringify(routes);
}

/** The CDK rule's pattern: `Ticket` events from anyone but Capstan itself. */
export const isTicketEvent = (event: PublishedEvent) => event.detailType === 'Ticket' && event.source !== 'capstan';

/** The EventBridge envelope a Lambda target receives. */
export function lambdaEnvelope(event: PublishedEvent, region: string, account: string) {
  return {
    version: '0',
    id: event.id,
    'detail-type': event.detailType,
    source: event.source,
    account,
    time: event.time,
    region,
    resources: [],
    detail: event.detail,
  };
}

/**
 * Delivers a matching event to its target the way EventBridge invokes a Lambda asynchronously:
 * later, retried with back-off, and, when every attempt failed, kept in a dead-letter file.
 */
export function asyncTarget(options: {
  invoke: (event: unknown) => Promise<unknown>;
  deadLetterFile: string;
  attempts?: number;
  log: (line: string) => void;
}) {
  const pending = new Set<Promise<void>>();
  const deliver = async (envelope: { id: string }) => {
    const attempts = options.attempts ?? 3;
    for (let attempt = 1; ; attempt++) {
      try {
        await options.invoke(envelope);
        return;
      } catch (error) {
        options.log(`ticket event ${envelope.id}: attempt ${attempt} failed: ${(error as Error).message}`);
        if (attempt >= attempts) {
          appendFileSync(
            options.deadLetterFile,
            `${JSON.stringify({ event: envelope, error: (error as Error).message })}\n`,
          );
          return;
        }
        await new Promise((r) => setTimeout(r, 200 * 2 ** attempt));
      }
    }
  };
  return {
    send(envelope: { id: string }) {
      const delivery = deliver(envelope).finally(() => pending.delete(delivery));
      pending.add(delivery);
    },
    /** Waits for deliveries in flight (at shutdown). */
    async drain() {
      await Promise.allSettled([...pending]);
    },
  };
}
