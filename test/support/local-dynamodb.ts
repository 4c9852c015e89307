import { createServer } from 'node:net';
import { ensureTables } from '../../shared/adapters/dynamodb/tables.js';
import { TABLES, type TableKey } from '../../shared/resources/tables.js';
import { type DynamoDbLocal, startDynamoDbLocal } from '../../local/dynamodb-local.js';

/** A free TCP port on loopback. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

async function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** A port whose next `count - 1` ports are free too: the local stack uses port..port+5. */
export async function freePortBlock(count = 10): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = 20_000 + Math.floor(Math.random() * 40_000);
    const checks = await Promise.all(Array.from({ length: count }, (_, i) => isFree(base + i)));
    if (checks.every(Boolean)) return base;
  }
  throw new Error('no block of free ports found');
}

export interface TestDynamo {
  readonly local: DynamoDbLocal;
  readonly tableNames: Record<TableKey, string>;
}

/**
 * Starts a DynamoDB Local (in memory unless given a `dataDir`), creates Capstan's tables from the
 * shared specs, and points this process's SDK clients and config at them through the standard
 * environment variables.
 */
export async function startTestDynamo(prefix = 'test', dataDir?: string): Promise<TestDynamo> {
  const local = await startDynamoDbLocal({ port: await freePort(), ...(dataDir && { dataDir }) });
  process.env.AWS_ENDPOINT_URL_DYNAMODB = local.endpoint;
  process.env.AWS_REGION = 'us-east-1';
  process.env.AWS_ACCESS_KEY_ID = 'local';
  process.env.AWS_SECRET_ACCESS_KEY = 'local';
  const tableNames = { state: `${prefix}-state`, events: `${prefix}-events`, connections: `${prefix}-connections` };
  process.env.CAPSTAN_STATE_TABLE = tableNames.state;
  process.env.CAPSTAN_EVENTS_TABLE = tableNames.events;
  process.env.CAPSTAN_CONNECTIONS_TABLE = tableNames.connections;
  await ensureTables(local.endpoint, TABLES, tableNames);
  return { local, tableNames };
}
