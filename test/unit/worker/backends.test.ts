import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { ECSClient, UpdateServiceCommand } from '@aws-sdk/client-ecs';
import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { RotateSecretCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SendCommandCommand, SSMClient } from '@aws-sdk/client-ssm';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeAwsActions } from '../../../shared/adapters/aws/actions.js';
import { makeAwsBackend } from '../../../worker-container/backends/aws.js';
import { makeHttpBackend } from '../../../worker-container/backends/http.js';
import { makeNotifyBackend } from '../../../worker-container/backends/notify.js';
import { makeScriptBackend, secretVariable } from '../../../worker-container/backends/script.js';
import { ActionError, type ActionContext, type Backend } from '../../../worker-container/backends/types.js';
import { checkAction } from '../../../shared/domain/catalogue.js';

const FIXTURES = join(import.meta.dirname, '..', '..', 'fixtures', 'scripts');

/** Runs an action the way the worker does: params checked against the catalogue first. */
async function run(
  backend: Backend,
  action: string,
  params: Record<string, unknown>,
  extra: Partial<ActionContext> = {},
) {
  const checked = checkAction(backend.name, action, params, ['params']);
  if (!checked.ok) throw new Error(JSON.stringify(checked.issues));
  const lines: string[] = [];
  const result = await backend.actions[action]!({
    params: checked.params,
    attempt: 1,
    signal: new AbortController().signal,
    secrets: {},
    output: (_stream, text) => lines.push(text),
    ...extra,
  });
  return { result, lines };
}

async function failure(promise: Promise<unknown>): Promise<ActionError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ActionError);
  return error as ActionError;
}

let server: Server;
let base: string;
const received: Array<{ method: string; url: string; body: string }> = [];

beforeAll(async () => {
  server = createServer((request: IncomingMessage, response) => {
    let body = '';
    request.on('data', (c: Buffer) => (body += c.toString()));
    request.on('end', () => {
      received.push({ method: request.method ?? '', url: request.url ?? '', body });
      if (request.url === '/health') return response.writeHead(200).end('{"status":"ok","db":{"up":true}}');
      if (request.url === '/big') return response.writeHead(200).end('x'.repeat(5000));
      if (request.url === '/down') return response.writeHead(503).end('busy');
      if (request.url === '/slow') return void setTimeout(() => response.writeHead(200).end('late'), 2000);
      if (request.url === '/hook') return response.writeHead(200).end('ok');
      response.writeHead(404).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => {
  server.closeAllConnections();
  server.close();
});

describe('the http backend', () => {
  const http = makeHttpBackend();

  it('checks the status and JSON fields of the answer', async () => {
    const { result } = await run(http, 'get', {
      url: `${base}/health`,
      expect_json: { status: 'ok', 'db.up': true },
    });
    expect(result.output).toMatchObject({ status: 200, checked: { status: 'ok', 'db.up': true } });
    const mismatch = await failure(run(http, 'get', { url: `${base}/health`, expect_json: { status: 'degraded' } }));
    expect(mismatch.code).toBe('JSON_MISMATCH');
    expect(mismatch.retryable).toBe(false);
  });

  it('treats a 5xx as retryable and another status as terminal', async () => {
    expect((await failure(run(http, 'get', { url: `${base}/down` }))).retryable).toBe(true);
    const notFound = await failure(run(http, 'get', { url: `${base}/nothing` }));
    expect(notFound).toMatchObject({ code: 'UNEXPECTED_STATUS', retryable: false });
  });

  it('enforces the response size limit and the timeout', async () => {
    expect((await failure(run(http, 'get', { url: `${base}/big`, max_response_bytes: 1000 }))).code).toBe(
      'RESPONSE_TOO_LARGE',
    );
    expect((await failure(run(http, 'get', { url: `${base}/slow`, timeout: '200ms' }))).code).toBe('HTTP_TIMEOUT');
  });

  it('posts a JSON body', async () => {
    await run(http, 'post', { url: `${base}/hook`, body: { hello: 'world' } });
    expect(received.at(-1)).toMatchObject({ method: 'POST', body: '{"hello":"world"}' });
  });
});

describe('the script backend', () => {
  const script = makeScriptBackend({ directory: FIXTURES, outputCapBytes: 64 });

  it('passes arguments as argv, one literal element each', async () => {
    const { lines } = await run(script, 'run', { script: 'echo-args', args: ['; rm -rf / #', '$HOME', 'a b'] });
    expect(lines).toEqual(['; rm -rf / #', '$HOME', 'a b']);
  });

  it('runs only scripts in the catalogue', async () => {
    expect((await failure(run(script, 'run', { script: 'not-there' }))).code).toBe('UNKNOWN_SCRIPT');
    expect(checkAction('script', 'run', { script: '../../bin/sh' }, []).ok).toBe(false);
  });

  it('gives the script its secrets as variables', async () => {
    const { lines } = await run(
      script,
      'run',
      { script: 'print-secret' },
      { secrets: { 'capstan/test-token': 'abc' } },
    );
    expect(lines).toEqual(['token is abc', 'done']);
    expect(secretVariable('capstan/db-password')).toBe('SECRET_CAPSTAN_DB_PASSWORD');
  });

  it('caps the output and kills the process group when aborted', async () => {
    const { lines, result } = await run(script, 'run', {
      script: 'echo-args',
      args: Array.from({ length: 20 }, (_, i) => `line number ${i}`),
    });
    expect(lines.at(-1)).toBe('[script output truncated after 64 bytes]');
    expect(result.output).toMatchObject({ truncated: true });
    const controller = new AbortController();
    const started = Date.now();
    setTimeout(() => controller.abort(new ActionError('STEP_TIMEOUT', 'too slow', true)), 200);
    const error = await failure(
      run(
        makeScriptBackend({ directory: '/usr/bin' }),
        'run',
        { script: 'sleep', args: ['30'] },
        {
          signal: controller.signal,
        },
      ),
    );
    expect(error.code).toBe('STEP_TIMEOUT');
    expect(Date.now() - started).toBeLessThan(5000);
  });
});

describe('the aws backend', () => {
  const ecs = mockClient(ECSClient);
  const ssm = mockClient(SSMClient);
  const lambda = mockClient(LambdaClient);
  const secrets = mockClient(SecretsManagerClient);
  const aws = makeAwsBackend(
    makeAwsActions({
      ecs: new ECSClient({ region: 'us-east-1' }),
      ssm: new SSMClient({ region: 'us-east-1' }),
      lambda: new LambdaClient({ region: 'us-east-1' }),
      secretsManager: new SecretsManagerClient({ region: 'us-east-1' }),
    }),
  );

  it('forces a new ECS deployment', async () => {
    ecs.on(UpdateServiceCommand).resolves({ service: { deployments: [{ id: 'ecs-svc/1', status: 'PRIMARY' }] } });
    const { result } = await run(aws, 'ecs.forceNewDeployment', { cluster: 'prod', service: 'web' });
    expect(ecs.commandCalls(UpdateServiceCommand)[0]?.args[0].input).toEqual({
      cluster: 'prod',
      service: 'web',
      forceNewDeployment: true,
    });
    expect(result.output).toEqual({ cluster: 'prod', service: 'web', deploymentId: 'ecs-svc/1' });
  });

  it('sends an SSM command and invokes a Lambda function', async () => {
    ssm.on(SendCommandCommand).resolves({ Command: { CommandId: 'cmd-1' } });
    const sent = await run(aws, 'ssm.sendCommand', {
      document_name: 'AWS-RestartService',
      instance_ids: ['i-0123456789abcdef0'],
    });
    expect(sent.result.output).toMatchObject({ commandId: 'cmd-1' });
    lambda.on(InvokeCommand).resolves({ StatusCode: 200, Payload: new TextEncoder().encode('{"ok":true}') as never });
    const invoked = await run(aws, 'lambda.invoke', { function_name: 'fix-it', payload: { a: 1 } });
    expect(invoked.result.output).toEqual({ statusCode: 200, payload: { ok: true } });
  });

  it('maps service errors to retryable or terminal failures', async () => {
    const throttled = Object.assign(new Error('slow down'), { name: 'ThrottlingException' });
    secrets.on(RotateSecretCommand).rejects(throttled);
    expect(await failure(run(aws, 'secretsmanager.rotateSecret', { secret_id: 's' }))).toMatchObject({
      code: 'AWS_ThrottlingException',
      retryable: true,
    });
    const denied = Object.assign(new Error('no'), { name: 'AccessDeniedException' });
    ecs.on(UpdateServiceCommand).rejects(denied);
    expect((await failure(run(aws, 'ecs.forceNewDeployment', { cluster: 'c', service: 's' }))).retryable).toBe(false);
  });
});

describe('the notify backend', () => {
  it('posts the text to the webhook held in a secret', async () => {
    const notify = makeNotifyBackend();
    expect(notify.secretsFor?.('post', { webhook_secret: 'hooks/ops', text: 'x' })).toEqual(['hooks/ops']);
    await run(
      notify,
      'post',
      { webhook_secret: 'hooks/ops', text: 'deploy done' },
      { secrets: { 'hooks/ops': `${base}/hook` } },
    );
    expect(received.at(-1)).toMatchObject({ method: 'POST', body: '{"text":"deploy done"}' });
    expect((await failure(run(notify, 'post', { webhook_secret: 'hooks/ops', text: 'x' }))).code).toBe(
      'SECRET_MISSING',
    );
  });
});
