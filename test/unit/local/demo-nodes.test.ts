import { describe, expect, it } from 'vitest';
import { DEMO_NODE_IDS, makeDemoNodes } from '../../../local/demo-nodes.js';

const call = async (nodes: ReturnType<typeof makeDemoNodes>, method: string, path: string) => {
  const reply = nodes.handle(method, path);
  if (!reply) throw new Error(`${path} is not a node route`);
  return reply;
};

describe('the demo web pool', () => {
  it('refuses to restart a node that is still in the pool', async () => {
    const nodes = makeDemoNodes();
    const reply = await call(nodes, 'POST', '/nodes/demo-web-1/restart');
    expect(reply.status).toBe(409);
    expect(nodes.journal()).toEqual([expect.objectContaining({ node: 'demo-web-1', action: 'restart', status: 409 })]);
  });

  it('drains, restarts, reports healthy and enables a node, journaling each call in order', async () => {
    const nodes = makeDemoNodes();
    await call(nodes, 'POST', '/nodes/demo-web-3/drain');
    expect((await call(nodes, 'POST', '/nodes/demo-web-3/restart')).body).toMatchObject({ status: 'up', restarts: 1 });
    expect((await call(nodes, 'GET', '/nodes/demo-web-3/health')).body).toMatchObject({ status: 'up', inPool: false });
    expect((await call(nodes, 'POST', '/nodes/demo-web-3/enable')).body).toMatchObject({ inPool: true });
    expect(nodes.journal().map((c) => [c.action, c.status])).toEqual([
      ['drain', 200],
      ['restart', 200],
      ['health', 200],
      ['enable', 200],
    ]);
  });

  it('leaves a node down after a restart it was told to fail, and its health says so', async () => {
    const nodes = makeDemoNodes();
    nodes.failNextRestart('demo-web-2');
    await call(nodes, 'POST', '/nodes/demo-web-2/drain');
    expect((await call(nodes, 'POST', '/nodes/demo-web-2/restart')).status).toBe(500);
    expect((await call(nodes, 'GET', '/nodes/demo-web-2/health')).status).toBe(503);
  });

  it('answers 404 for an unknown node, 405 for a wrong method, and nothing for other paths', async () => {
    const nodes = makeDemoNodes();
    expect((await call(nodes, 'POST', '/nodes/web-9/drain')).status).toBe(404);
    expect((await call(nodes, 'GET', `/nodes/${DEMO_NODE_IDS[0]}/drain`)).status).toBe(405);
    expect(nodes.handle('GET', '/health')).toBeUndefined();
  });
});
