import { documentClient } from '../../shared/adapters/dynamodb/client.js';
import { checkTable } from '../../shared/adapters/dynamodb/health.js';
import { config } from '../../shared/config.js';
import { httpHandler } from '../http.js';

/** GET /v1/health: 200 when every component answers, 503 naming the one that does not. */
export const handler = httpHandler(async () => {
  const { CAPSTAN_STATE_TABLE, CAPSTAN_EVENTS_TABLE } = config();
  const [state, events] = await Promise.all([
    checkTable(documentClient, CAPSTAN_STATE_TABLE),
    checkTable(documentClient, CAPSTAN_EVENTS_TABLE),
  ]);
  const components = { stateTable: state, eventLog: events };
  const healthy = Object.values(components).every((c) => c.status === 'ok');
  return { status: healthy ? 200 : 503, body: { status: healthy ? 'ok' : 'degraded', components } };
});
