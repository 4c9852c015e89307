import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { APIGatewayAuthorizerResult, APIGatewayRequestAuthorizerEvent } from 'aws-lambda';
import { ensureTables } from '../shared/adapters/dynamodb/tables.js';
import { TABLES, type TableKey } from '../shared/resources/tables.js';
import { startDynamoDbLocal } from './dynamodb-local.js';
import { startGateway } from './gateway.js';
import { makeLocalIssuer } from './issuer.js';

const ROOT = join(import.meta.dirname, '..');
// CAPSTAN_HOME moves the local state (tests use a temporary one).
const STATE_DIR = process.env.CAPSTAN_HOME ?? join(ROOT, '.capstan');
const DATA_DIR = join(STATE_DIR, 'data');

async function main(): Promise<void> {
  const started = performance.now();
  const fresh = process.argv.includes('--fresh');
  const port = Number(process.env.CAPSTAN_PORT ?? 4000);
  if (!Number.isInteger(port) || port <= 0 || port > 65535)
    throw new Error(`CAPSTAN_PORT must be a TCP port, got '${process.env.CAPSTAN_PORT}'`);
  if (fresh) rmSync(DATA_DIR, { recursive: true, force: true });
  mkdirSync(join(DATA_DIR, 'dynamodb'), { recursive: true });

  const dynamo = await startDynamoDbLocal({ port: port + 1, dataDir: join(DATA_DIR, 'dynamodb') });
  // Whatever ends this process, DynamoDB Local must not outlive it.
  process.once('exit', () => {
    if (dynamo.process.exitCode === null) dynamo.process.kill('SIGKILL');
  });
  const shutdown = async (signal: string) => {
    console.log(`\n${signal}: stopping the local stack`);
    await dynamo.stop();
    process.exit(0);
  };
  process.once('SIGINT', () => void shutdown('SIGINT'));
  process.once('SIGTERM', () => void shutdown('SIGTERM'));

  // The same variables a Lambda gets in AWS; the SDK reads the endpoints itself.
  const restUrl = `http://127.0.0.1:${port}`;
  const tableNames: Record<TableKey, string> = {
    state: 'capstan-state',
    events: 'capstan-events',
    connections: 'capstan-connections',
  };
  Object.assign(process.env, {
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'local',
    AWS_SECRET_ACCESS_KEY: 'local',
    AWS_ENDPOINT_URL_DYNAMODB: dynamo.endpoint,
    CAPSTAN_ENVIRONMENT: 'dev',
    CAPSTAN_STATE_TABLE: tableNames.state,
    CAPSTAN_EVENTS_TABLE: tableNames.events,
    CAPSTAN_CONNECTIONS_TABLE: tableNames.connections,
    CAPSTAN_JWT_ISSUER: `${restUrl}/`,
    CAPSTAN_JWKS_URL: `${restUrl}/.well-known/jwks.json`,
    POWERTOOLS_LOG_LEVEL: process.env.POWERTOOLS_LOG_LEVEL ?? 'WARN',
  });
  await ensureTables(dynamo.endpoint, TABLES, tableNames);

  const issuer = await makeLocalIssuer(join(STATE_DIR, 'issuer-key.json'), `${restUrl}/`, 'capstan');
  // Imported after the environment is set: handlers read their configuration at cold start.
  const { handler: authorizer } = (await import('../functions/authorizer.js')) as {
    handler: (event: APIGatewayRequestAuthorizerEvent) => Promise<APIGatewayAuthorizerResult>;
  };
  await startGateway({ port, authorizer, staticJson: { '/.well-known/jwks.json': issuer.jwks } });

  const localFile = join(STATE_DIR, 'local.json');
  writeFileSync(
    localFile,
    `${JSON.stringify({ restUrl: `${restUrl}/v1`, wsUrl: `ws://127.0.0.1:${port}/ws`, tokens: issuer.tokens }, null, 2)}\n`,
    { mode: 0o600 },
  );

  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  console.log(`Capstan local stack ready in ${seconds} s
  REST API     ${restUrl}/v1   (health: ${restUrl}/v1/health)
  DynamoDB     ${dynamo.endpoint}   data in ${relative(ROOT, DATA_DIR)}/
  tokens       ${relative(ROOT, localFile)}

Register an example runbook:
  curl -s -X POST ${restUrl}/v1/runbooks -H "Authorization: Bearer $(node -p "require('./.capstan/local.json').tokens.operator")" \\
    -H 'Content-Type: application/yaml' --data-binary @examples/runbooks/hello.yaml

Ctrl-C stops everything.`);
}

main().catch((error: unknown) => {
  console.error(`capstan: ${(error as Error).message}`);
  process.exit(1);
});
