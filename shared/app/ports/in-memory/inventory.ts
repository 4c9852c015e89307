import { ConflictError } from '../../../domain/errors.js';
import { nodeAsOf, type StoredNode } from '../../../domain/inventory.js';
import type { Clock } from '../../ports.js';
import type { InventoryStore } from '../inventory.js';

const keyOf = (tenantId: string, nodeId: string) => `${tenantId}|${nodeId}`;
const byId = (a: { id: string }, b: { id: string }) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/** The inventory store held in memory, with the DynamoDB adapter's rules (the same contract tests). */
export function makeInMemoryInventoryStore(options: { clock: Clock; heartbeatMs: number }): InventoryStore {
  const nodes = new Map<string, StoredNode>();
  const agentOwns = (tenantId: string, id: string, workerId: string) => {
    const node = nodes.get(keyOf(tenantId, id));
    return node?.source === 'agent' && node.workerId === workerId ? node : undefined;
  };
  return {
    list(tenantId, filter) {
      const now = options.clock.now();
      return Promise.resolve(
        [...nodes.values()]
          .filter((n) => n.tenantId === tenantId && (filter?.group === undefined || n.groups.includes(filter.group)))
          .map((n) => nodeAsOf(structuredClone(n), now, options.heartbeatMs))
          .sort(byId),
      );
    },

    declare(node, at) {
      const current = nodes.get(keyOf(node.tenantId, node.id));
      if (current?.source === 'agent')
        return Promise.reject(new ConflictError(`node '${node.id}' is an agent node: it describes itself`));
      const stored: StoredNode = { ...structuredClone(node), source: 'declared', lastSeen: at.toISOString() };
      nodes.set(keyOf(node.tenantId, node.id), stored);
      return Promise.resolve({ node: nodeAsOf(stored, at, options.heartbeatMs), created: current === undefined });
    },

    remove(tenantId, nodeId) {
      return Promise.resolve(nodes.delete(keyOf(tenantId, nodeId)));
    },

    registerAgent(agent, at) {
      const current = nodes.get(keyOf(agent.tenantId, agent.id));
      if (current?.source === 'declared')
        return Promise.reject(new ConflictError(`node '${agent.id}' is declared: remove it before an agent takes it`));
      nodes.set(keyOf(agent.tenantId, agent.id), {
        ...structuredClone(agent),
        source: 'agent',
        lastSeen: at.toISOString(),
      });
      return Promise.resolve();
    },

    heartbeatAgent(agent, at) {
      const node = agentOwns(agent.tenantId, agent.id, agent.workerId);
      if (!node || node.deregistered === true) return Promise.resolve(false);
      node.lastSeen = at.toISOString();
      return Promise.resolve(true);
    },

    deregisterAgent(agent, at) {
      const node = agentOwns(agent.tenantId, agent.id, agent.workerId);
      if (node) {
        node.deregistered = true;
        node.lastSeen = at.toISOString();
      }
      return Promise.resolve();
    },
  };
}
