import { join, relative } from 'node:path';
import { startLocalStack } from './stack.js';
import { parseAgentWorkers, parseWorkerCounts } from './workers.js';
import { DEMO_NODE_GROUP } from './demo-nodes.js';

const ROOT = join(import.meta.dirname, '..');

function positiveNumber(name: string, fallback: number): number {
  const text = process.env[name];
  if (text === undefined || text === '') return fallback;
  const value = Number(text);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number, got '${text}'`);
  return value;
}

async function main(): Promise<void> {
  const started = performance.now();
  const port = positiveNumber('CAPSTAN_PORT', 4000);
  if (!Number.isInteger(port) || port > 65526)
    throw new Error(`CAPSTAN_PORT must be a TCP port below 65527 (it uses the next nine), got ${port}`);
  // CAPSTAN_HOME moves the local state (tests use a temporary one).
  const stateDir = process.env.CAPSTAN_HOME ?? join(ROOT, '.capstan');
  const log = (line: string) => console.log(line);
  const stack = await startLocalStack({
    port,
    stateDir,
    fresh: process.argv.includes('--fresh'),
    workers: parseWorkerCounts(process.env.CAPSTAN_WORKERS, 1),
    agents: parseAgentWorkers(process.env.CAPSTAN_WORKERS),
    reconcileIntervalMs: positiveNumber('CAPSTAN_RECONCILE_SECONDS', 60) * 1000,
    // The web pool rolling-restart acts on, declared in the local tenant's inventory (README: Examples).
    demoNodes: true,
    // CAPSTAN_AUTOSCALE=1: the pools follow their queues within CAPSTAN_CAPACITY, as in AWS.
    ...(process.env.CAPSTAN_AUTOSCALE === '1' && { autoscale: {} }),
    // Alerts go to the demo service's `/hooks/notify` unless the developer names another receiver.
    ...(process.env.CAPSTAN_NOTIFY_WEBHOOK_URL && {
      env: { CAPSTAN_NOTIFY_WEBHOOK_URL: process.env.CAPSTAN_NOTIFY_WEBHOOK_URL },
    }),
    log,
  });
  // Whatever ends this process, DynamoDB Local and the workers must not outlive it.
  process.once('exit', () => stack.kill());
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) {
      stack.kill();
      process.exit(1);
    }
    stopping = true;
    log(`\n${signal}: stopping the local stack (again to stop at once)`);
    stack.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));

  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  const counts = Object.entries(parseWorkerCounts(process.env.CAPSTAN_WORKERS, 1))
    .map(([profile, count]) => `${profile} ${count}`)
    .concat(parseAgentWorkers(process.env.CAPSTAN_WORKERS).map((a) => `agent ${a.nodeId} (${a.groups.join('+')})`))
    .join(', ');
  const e = stack.endpoints;
  const shown = relative(ROOT, stateDir);
  const home = shown.startsWith('..') ? stateDir : shown || '.';
  log(`Capstan local stack ready in ${seconds} s
  console          ${stack.restUrl.replace(/\/v1$/, '')}/   (sign in as a development identity)
  REST API         ${stack.restUrl}   (health: ${stack.restUrl}/health)
  WebSocket        ${stack.wsUrl}?token=<JWT>
  DynamoDB         ${e.DYNAMODB}   data in ${home}/data/
  SQS + S3         ${e.SQS}
  Step Functions   ${e.SFN}
  Secrets Manager  ${e.SECRETS_MANAGER}   secrets in ${home}/secrets.json
  EventBridge      ${e.EVENTBRIDGE}
  demo service     ${stack.demo.url}   (what the example runbooks call; its nodes are group ${DEMO_NODE_GROUP})
  workers          ${counts}   (${
    stack.scaler
      ? 'to start; scaled on queue backlog within CAPSTAN_CAPACITY'
      : 'CAPSTAN_WORKERS=dev-flex=2,... to change'
  })
  tokens           ${home}/local.json${
    stack.resumedExecutions.length > 0 ? `\n  resumed          ${stack.resumedExecutions.length} run(s) in flight` : ''
  }

Register the hello runbook and follow a run of it (the CLI reads ${home}/local.json):
  npx capstan runbooks push examples/runbooks/hello.yaml
  npx capstan run hello --wait

Ctrl-C stops everything.`);
}

main().catch((error: unknown) => {
  console.error(`capstan: ${(error as Error).message}`);
  process.exit(1);
});
