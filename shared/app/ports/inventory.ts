import type { InventoryNode } from '../../domain/inventory.js';

/** Reads a tenant's inventory, each node's status as of now (agents go offline when silent). */
export interface InventoryReader {
  list(tenantId: string, filter?: { readonly group?: string }): Promise<InventoryNode[]>;
}
