import type { AgentRegistration, InventoryNode, NodeDeclaration } from '../../domain/inventory.js';

/** Reads a tenant's inventory, each node's status as of now (agents go offline when silent). */
export interface InventoryReader {
  list(tenantId: string, filter?: { readonly group?: string }): Promise<InventoryNode[]>;
}

/**
 * The tenant-scoped inventory: nodes admins declare and nodes agent workers register. Every call
 * names the tenant, and nothing of one tenant is reachable through another tenant's id.
 */
export interface InventoryStore extends InventoryReader {
  /**
   * Declares a node, or replaces a declared node's groups and attributes; `created` tells which.
   * A `ConflictError` when an agent node has that id (an agent describes itself).
   */
  declare(node: NodeDeclaration, at: Date): Promise<{ readonly node: InventoryNode; readonly created: boolean }>;
  /** Removes a node of the tenant; false when the tenant has none by that id. */
  remove(tenantId: string, nodeId: string): Promise<boolean>;
  /**
   * Registers (or registers again) an agent node for its worker. A `ConflictError` when a
   * declared node has that id: the admin removes it first.
   */
  registerAgent(agent: AgentRegistration, at: Date): Promise<void>;
  /**
   * Records an agent's heartbeat; false when its record is gone (removed) or another worker
   * registered the node since, so the caller registers again or stands down.
   */
  heartbeatAgent(agent: Pick<AgentRegistration, 'tenantId' | 'id' | 'workerId'>, at: Date): Promise<boolean>;
  /** Marks the agent offline at once (its worker drained), unless another worker holds the node now. */
  deregisterAgent(agent: Pick<AgentRegistration, 'tenantId' | 'id' | 'workerId'>, at: Date): Promise<void>;
}
