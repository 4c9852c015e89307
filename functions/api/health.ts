import { documentClient } from '../../shared/adapters/dynamodb/client.js';
import {
  checkBucket,
  checkQueue,
  checkStateMachine,
  checkTable,
  type ComponentHealth,
} from '../../shared/adapters/health.js';
import { config } from '../../shared/config.js';
import { SANDBOX_PROFILE_NAMES } from '../../shared/domain/sandbox-profiles.js';
import { deadLetterQueueName, stepQueueName } from '../../shared/resources/queues.js';
import { httpHandler } from '../http.js';

/**
 * GET /v1/health: the status of each component. 200 while every one answers (some may be
 * `degraded`), 503 naming the ones that do not.
 */
export const handler = httpHandler(async () => {
  const c = config();
  const optional = (value: string | undefined, check: (v: string) => Promise<ComponentHealth>) =>
    value === undefined ? Promise.resolve(undefined) : check(value);
  const [stateTable, eventLog, connections, stateMachine, evidenceBucket, ...queues] = await Promise.all([
    checkTable(documentClient, c.CAPSTAN_STATE_TABLE),
    checkTable(documentClient, c.CAPSTAN_EVENTS_TABLE),
    checkTable(documentClient, c.CAPSTAN_CONNECTIONS_TABLE),
    optional(c.CAPSTAN_STATE_MACHINE_ARN, checkStateMachine),
    optional(c.CAPSTAN_EVIDENCE_BUCKET, checkBucket),
    ...SANDBOX_PROFILE_NAMES.map((profile) =>
      checkQueue(stepQueueName(c.CAPSTAN_PREFIX, profile), deadLetterQueueName(c.CAPSTAN_PREFIX, profile)),
    ),
  ]);
  const components: Record<string, ComponentHealth> = {
    stateTable,
    eventLog,
    connections,
    ...(stateMachine && { stateMachine }),
    ...(evidenceBucket && { evidenceBucket }),
    ...Object.fromEntries(
      SANDBOX_PROFILE_NAMES.map((profile, i) => [`queue:${profile}`, queues[i] as ComponentHealth]),
    ),
  };
  const statuses = Object.values(components).map((component) => component.status);
  const status = statuses.includes('unavailable') ? 'unavailable' : statuses.includes('degraded') ? 'degraded' : 'ok';
  return { status: status === 'unavailable' ? 503 : 200, body: { status, components } };
});
