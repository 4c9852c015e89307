import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SQSClient } from '@aws-sdk/client-sqs';
import { type LocalStack, PREFIX } from '../../local/stack.js';
import { makeSqsCommandQueue } from '../../shared/adapters/sqs/command-queue.js';
import type { StepCommand } from '../../shared/domain/messages.js';
import { callApi, until as waitUntil } from '../support/stack-api.js';
import { startTestStack, stopTestStack } from '../support/test-stack.js';

let stack: LocalStack | undefined;
let home: string | undefined;
const log: string[] = [];

beforeAll(async () => {
  ({ stack, home } = await startTestStack('inventory', {
    workers: { 'dev-flex': 0, 'prod-standard': 0, 'prod-critical': 0, 'staging-standard': 0 },
    agents: [
      { nodeId: 'web-1', groups: ['web'], profile: 'dev-flex' },
      { nodeId: 'web-2', groups: ['web', 'eu'], profile: 'dev-flex' },
    ],
    reconcileIntervalMs: 60_000,
    env: { CAPSTAN_WORKER_HEARTBEAT_SECONDS: '1', POWERTOOLS_LOG_LEVEL: 'INFO' },
    log: (line) => log.push(line),
  }));
}, 90_000);

afterAll(async () => {
  await stopTestStack(stack, home);
});

const running = () => {
  if (!stack) throw new Error('the stack did not start');
  return stack;
};
const api = (as: string, method: string, path: string, body?: unknown) => {
  const token = running().issuer.tokens[as];
  if (token === undefined) throw new Error(`no token for ${as}`);
  return callApi(running().restUrl, token, method, path, body);
};
const until = <T>(what: string, probe: () => Promise<T | undefined>) =>
  waitUntil(what, probe, 30_000, () => log.slice(-30).join('\n'));

type NodeView = { id: string; source: string; status: string; groups: string[]; attributes: Record<string, string> };
const nodes = async (as: string, query = '') => (await api(as, 'GET', `/inventory${query}`)).body.nodes as NodeView[];

describe('the inventory on the local stack', () => {
  it('lists agent and declared nodes of a group with their status and source, and hides them from another tenant', async () => {
    const declared = await api('admin', 'PUT', '/inventory/nodes/web-db', {
      groups: ['web', 'db'],
      attributes: { host: '10.0.0.7' },
    });
    expect(declared.status).toBe(201);

    const web = await until('both agents and the declared node in group web', async () => {
      const listed = await nodes('approver', '?group=web');
      return listed.length === 3 && listed.every((n) => n.status === 'online') ? listed : undefined;
    });
    expect(web.map((n) => [n.id, n.source, n.status])).toEqual([
      ['web-1', 'agent', 'online'],
      ['web-2', 'agent', 'online'],
      ['web-db', 'declared', 'online'],
    ]);
    expect(web[2]?.attributes).toEqual({ host: '10.0.0.7' });
    expect((await nodes('approver', '?group=eu')).map((n) => n.id)).toEqual(['web-2']);

    expect(await nodes('otherTenant')).toEqual([]);
    expect((await api('otherTenant', 'DELETE', '/inventory/nodes/web-db')).status).toBe(404);
    expect((await api('otherTenant', 'DELETE', '/inventory/nodes/web-1')).status).toBe(404);
    expect((await nodes('approver', '?group=web')).map((n) => n.id)).toEqual(['web-1', 'web-2', 'web-db']);
  });

  it('refuses to declare over an agent node, and to let a non-admin declare', async () => {
    const overAgent = await api('admin', 'PUT', '/inventory/nodes/web-1', { groups: ['web'] });
    expect(overAgent.status).toBe(409);
    expect(overAgent.body).toMatchObject({ error: { code: 'CONFLICT' } });
    expect((await api('operator', 'PUT', '/inventory/nodes/db-9', { groups: ['db'] })).status).toBe(403);
    const bad = await api('admin', 'PUT', '/inventory/nodes/db-9', { groups: ['no spaces'] });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toContain('groups');
  });

  it("delivers a command for one agent node to that node's worker and never to another", async () => {
    const sqs = new SQSClient({
      endpoint: running().endpoints.SQS,
      region: 'us-east-1',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      useQueueUrlAsEndpoint: false,
    });
    const command = (nodeId: string): StepCommand => ({
      v: 1,
      // No such execution: the worker that receives it logs the delivery as ended and deletes it.
      executionId: `probe-${nodeId}-${Date.now()}`,
      runId: 'run-routing-probe',
      tenantId: 'local',
      stepId: 'probe',
      kind: 'step',
      targetId: nodeId,
      attempt: 1,
      idempotencyKey: `probe-${nodeId}`,
      backend: 'test',
      action: 'echo',
      params: { message: 'hi' },
      timeoutMs: 1000,
      secrets: [],
      sandboxProfile: 'dev-flex',
      target: { id: nodeId, source: 'agent', attributes: {} },
    });
    const [forOne, forTwo] = [command('web-1'), command('web-2')];
    try {
      expect(await makeSqsCommandQueue(sqs, PREFIX).send('dev-flex', [forOne, forTwo])).toEqual([]);
    } finally {
      sqs.destroy();
    }
    const handledBy = (executionId: string) =>
      log.filter((line) => line.includes(executionId)).map((line) => /^\[agent:([^\]]+)\]/.exec(line)?.[1]);
    await until('both agents to receive their command', async () =>
      handledBy(forOne.executionId).length > 0 && handledBy(forTwo.executionId).length > 0 ? true : undefined,
    );
    expect(new Set(handledBy(forOne.executionId))).toEqual(new Set(['web-1']));
    expect(new Set(handledBy(forTwo.executionId))).toEqual(new Set(['web-2']));
  });

  it('shows an agent offline once its worker stops', async () => {
    await running().workers.stopAgent('web-2');
    const after = await until('web-2 to go offline', async () => {
      const listed = await nodes('approver', '?group=web');
      return listed.find((n) => n.id === 'web-2')?.status === 'offline' ? listed : undefined;
    });
    expect(after.find((n) => n.id === 'web-1')?.status).toBe('online');
  });

  it('removes a declared node, and answers 404 the second time', async () => {
    expect((await api('admin', 'DELETE', '/inventory/nodes/web-db')).status).toBe(200);
    expect((await api('admin', 'DELETE', '/inventory/nodes/web-db')).status).toBe(404);
    expect((await nodes('approver')).map((n) => n.id)).toEqual(['web-1', 'web-2']);
  });
});
