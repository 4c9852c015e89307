import { z } from 'zod';
import type { Target } from './runbook.js';
import { livenessOf } from './workers.js';
import { nodeAttributesSchema, nodeIdSchema } from './targets.js';

export { nodeAttributesSchema, nodeIdSchema, resolvedTargetSchema, type ResolvedTarget } from './targets.js';

export const groupNameSchema = z
  .string()
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/,
    'must be 1-63 letters, digits, ., _ or -, starting with a letter or digit',
  );

/**
 * A node of a tenant's inventory (brief: "Inventory and targets"). An agent node is a worker
 * started with `CAPSTAN_NODE_ID` that registered itself, and commands addressed to it reach that
 * worker only; a declared node is a host, instance or service a profile's workers act on remotely.
 */
export const inventoryNodeSchema = z.strictObject({
  id: nodeIdSchema,
  tenantId: z.string().min(1),
  groups: z.array(groupNameSchema).max(50),
  attributes: nodeAttributesSchema,
  source: z.enum(['agent', 'declared']),
  /** Agents: from their heartbeats. Declared nodes are always online. */
  status: z.enum(['online', 'offline']),
  lastSeen: z.iso.datetime(),
});
export type InventoryNode = z.infer<typeof inventoryNodeSchema>;

/**
 * A node as the inventory keeps it. Its status is not stored: an agent's is derived from
 * `lastSeen` when read (its heartbeats), so a silent agent shows offline without anyone writing.
 */
export const storedNodeSchema = inventoryNodeSchema.omit({ status: true }).extend({
  /** The worker process that registered an agent node; a heartbeat of another worker is refused. */
  workerId: z.string().min(1).optional(),
  /** An agent node whose worker drained: offline until a worker registers it again. */
  deregistered: z.boolean().optional(),
});
export type StoredNode = z.infer<typeof storedNodeSchema>;

/** What a declared node is given by an admin: the rest is the inventory's. */
export type NodeDeclaration = Pick<InventoryNode, 'id' | 'tenantId' | 'groups' | 'attributes'>;

/** What an agent worker registers for its node. */
export type AgentRegistration = NodeDeclaration & { readonly workerId: string };

/**
 * A stored node as seen at `now`: a declared node is always online; an agent node is offline
 * once it deregistered or missed `MISSED_BEATS_OFFLINE` heartbeats (the workers' own rule).
 */
export function nodeAsOf(node: StoredNode, now: Date, heartbeatMs: number): InventoryNode {
  const { workerId: _workerId, deregistered, ...rest } = node;
  const silent = livenessOf({ status: 'idle', lastHeartbeatAt: node.lastSeen }, now, heartbeatMs).status === 'offline';
  const online = node.source === 'declared' || (deregistered !== true && !silent);
  return { ...rest, status: online ? 'online' : 'offline' };
}

/**
 * The nodes a step's target names, in id order: every node for `{all: true}`, the group's
 * members, or the one node. An empty list when nothing matches (the caller decides what that
 * means); the list is fixed at the step's first dispatch, so a node added later is not included.
 */
export function resolveTarget(target: Target, nodes: readonly InventoryNode[]): InventoryNode[] {
  const matches =
    'all' in target
      ? nodes
      : 'group' in target
        ? nodes.filter((n) => n.groups.includes(target.group))
        : nodes.filter((n) => n.id === target.node);
  return [...matches].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

/** What a target selector says, for messages: `group web`, `node web-01`, `all nodes`. */
export function describeTarget(target: Target): string {
  return 'all' in target ? 'all nodes' : 'group' in target ? `group ${target.group}` : `node ${target.node}`;
}
