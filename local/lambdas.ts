import type { Context } from 'aws-lambda';
import { DEFINITION_FUNCTIONS } from '../shared/workflow/definition.js';

/**
 * The functions the local stack invokes in-process, by the name the CDK stack gives them
 * (`<prefix>-<name>`), each with the module the CDK stack bundles.
 */
const MODULES: Readonly<Record<string, string>> = {
  ...Object.fromEntries(Object.values(DEFINITION_FUNCTIONS).map((name) => [name, `../functions/workflow/${name}.ts`])),
  'ws-connect': '../functions/ws/connect.ts',
  'ws-disconnect': '../functions/ws/disconnect.ts',
  'ws-default': '../functions/ws/default.ts',
  broadcaster: '../functions/broadcaster.ts',
  reconciler: '../functions/reconciler.ts',
  'worker-stopped': '../functions/worker-stopped.ts',
  'ticket-ingest': '../functions/ticket-ingest.ts',
  'lifecycle-publisher': '../functions/lifecycle-publisher.ts',
  admitter: '../functions/admitter.ts',
};

type Handler = (event: unknown, context: Context) => Promise<unknown>;
const loaded = new Map<string, Promise<Handler>>();

/** Counts of invocations per function, for the bench. */
export const invocationCounts: Record<string, number> = {};

/** The function name without an ARN or the deployment prefix. */
export function localFunctionName(nameOrArn: string, prefix: string): string {
  const name = nameOrArn.split(':function:').at(-1)?.split(':')[0] ?? nameOrArn;
  return name.startsWith(`${prefix}-`) ? name.slice(prefix.length + 1) : name;
}

export function lambdaContext(functionName: string, timeoutMs = 30_000): Context {
  const deadline = Date.now() + timeoutMs;
  return {
    functionName,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:us-east-1:000000000000:function:${functionName}`,
    memoryLimitInMB: '512',
    awsRequestId: crypto.randomUUID(),
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName: 'local',
    callbackWaitsForEmptyEventLoop: false,
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}

/** Invokes a function by name or ARN in this process, the way Lambda would, importing its module once. */
export async function invokeLocal(nameOrArn: string, event: unknown, prefix = 'capstan'): Promise<unknown> {
  const name = localFunctionName(nameOrArn, prefix);
  const module = MODULES[name];
  if (!module) throw new Error(`no local function named '${name}'`);
  let handler = loaded.get(name);
  if (!handler) {
    handler = import(module).then((m: { handler: Handler }) => m.handler);
    loaded.set(name, handler);
  }
  invocationCounts[name] = (invocationCounts[name] ?? 0) + 1;
  return (await handler)(event, lambdaContext(name));
}
