import { describe, expect, it } from 'vitest';
import { makeAgentNode, makeDeclareNode, makeListInventory, makeRemoveNode } from '../../../shared/app/inventory.js';
import { makeFakeClock } from '../../../shared/app/ports/in-memory/fakes.js';
import { makeInMemoryInventoryStore } from '../../../shared/app/ports/in-memory/inventory.js';
import type { Principal } from '../../../shared/domain/entities.js';
import { ConflictError, NotFoundError } from '../../../shared/domain/errors.js';
import { routeFor } from '../../../shared/resources/routes.js';

const admin: Principal = { subject: 'ada', tenantId: 'acme', roles: ['admin'] };
const outsider: Principal = { subject: 'oz', tenantId: 'other', roles: ['admin'] };

function setup() {
  const clock = makeFakeClock();
  const inventory = makeInMemoryInventoryStore({ clock, heartbeatMs: 15_000 });
  const deps = { inventory, clock };
  return {
    clock,
    inventory,
    list: makeListInventory(deps),
    declare: makeDeclareNode(deps),
    remove: makeRemoveNode(deps),
    agent: (id: string, workerId = `w-${id}`) =>
      makeAgentNode(deps, { tenantId: 'acme', id, groups: ['web'], attributes: {}, workerId }),
  };
}

describe('inventory use cases', () => {
  it("declares a node in the caller's tenant, deduplicating its groups", async () => {
    const { declare, list } = setup();
    const result = await declare(admin, 'db-1', { groups: ['db', 'db'], attributes: { host: 'db.internal' } });
    expect(result).toMatchObject({ created: true, node: { id: 'db-1', tenantId: 'acme', groups: ['db'] } });
    expect(await list(admin, { group: 'db' })).toMatchObject([{ id: 'db-1', source: 'declared', status: 'online' }]);
  });

  it('hides every node from another tenant, and answers 404 when it removes one', async () => {
    const { declare, list, remove } = setup();
    await declare(admin, 'db-1', { groups: ['db'] });
    expect(await list(outsider, {})).toEqual([]);
    await expect(remove(outsider, 'db-1')).rejects.toBeInstanceOf(NotFoundError);
    expect(await list(admin, {})).toHaveLength(1);
  });

  it('refuses to declare over an agent node', async () => {
    const { agent, declare } = setup();
    await agent('web-1').register();
    await expect(declare(admin, 'web-1', { groups: ['web'] })).rejects.toBeInstanceOf(ConflictError);
  });

  it('registers an agent node again when a beat finds it removed', async () => {
    const { agent, remove, list } = setup();
    const node = agent('web-1');
    await node.register();
    await remove(admin, 'web-1');
    await node.beat();
    expect(await list(admin, {})).toMatchObject([{ id: 'web-1', source: 'agent', status: 'online' }]);
  });

  it('shows an agent offline once it deregisters', async () => {
    const { agent, list, clock } = setup();
    const node = agent('web-1');
    await node.register();
    clock.advance(1000);
    await node.deregister();
    expect(await list(admin, {})).toMatchObject([{ id: 'web-1', status: 'offline' }]);
  });

  it('routes the inventory paths to their handlers', () => {
    expect(routeFor('GET', '/v1/inventory')?.handler).toBe('list-inventory');
    expect(routeFor('PUT', '/v1/inventory/nodes/web-1')).toMatchObject({ handler: 'put-node', roles: ['admin'] });
    expect(routeFor('DELETE', '/v1/inventory/nodes/web-1')).toMatchObject({ handler: 'delete-node', roles: ['admin'] });
  });
});
