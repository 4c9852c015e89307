import { z } from 'zod';
import type { Principal } from '../domain/entities.js';
import { NotFoundError } from '../domain/errors.js';
import {
  type AgentRegistration,
  groupNameSchema,
  type InventoryNode,
  nodeAttributesSchema,
  nodeIdSchema,
} from '../domain/inventory.js';
import type { InventoryStore } from './ports/inventory.js';
import type { Clock } from './ports.js';
import type { AgentNode } from './worker-ports.js';

export interface InventoryDeps {
  readonly inventory: InventoryStore;
  readonly clock: Clock;
}

export const inventoryQuerySchema = z.strictObject({ group: groupNameSchema.optional() });
export const nodePathSchema = z.object({ id: nodeIdSchema });
export const declareNodeBodySchema = z.strictObject({
  groups: z.array(groupNameSchema).max(50),
  attributes: nodeAttributesSchema.optional(),
});

/** GET /v1/inventory: the caller's tenant's nodes (optionally one group's), each with its status as of now. */
export function makeListInventory(deps: InventoryDeps) {
  return async (principal: Principal, query: z.infer<typeof inventoryQuerySchema>): Promise<InventoryNode[]> =>
    deps.inventory.list(principal.tenantId, query.group === undefined ? {} : { group: query.group });
}

/**
 * PUT /v1/inventory/nodes/{id}: declares a node of the caller's tenant (a host, instance or service
 * the profile's workers act on remotely), or replaces a declared node's groups and attributes.
 * Refused with a conflict when an agent node has that id.
 */
export function makeDeclareNode(deps: InventoryDeps) {
  return async (principal: Principal, nodeId: string, body: z.infer<typeof declareNodeBodySchema>) =>
    deps.inventory.declare(
      {
        id: nodeId,
        tenantId: principal.tenantId,
        groups: [...new Set(body.groups)],
        attributes: body.attributes ?? {},
      },
      deps.clock.now(),
    );
}

/** DELETE /v1/inventory/nodes/{id}: removes a node of the caller's tenant; 404 when it has none by that id. */
export function makeRemoveNode(deps: InventoryDeps) {
  return async (principal: Principal, nodeId: string): Promise<{ id: string; removed: true }> => {
    if (!(await deps.inventory.remove(principal.tenantId, nodeId)))
      throw new NotFoundError(`no node '${nodeId}' in the inventory`);
    return { id: nodeId, removed: true };
  };
}

/**
 * An agent worker's node in its tenant's inventory. A beat the store refuses (an admin removed
 * the node, or it was marked offline) registers the node again: the worker is alive and serving it.
 */
export function makeAgentNode(deps: InventoryDeps, agent: AgentRegistration): AgentNode {
  const register = () => deps.inventory.registerAgent(agent, deps.clock.now());
  return {
    register,
    async beat() {
      if (!(await deps.inventory.heartbeatAgent(agent, deps.clock.now()))) await register();
    },
    deregister: () => deps.inventory.deregisterAgent(agent, deps.clock.now()),
  };
}
