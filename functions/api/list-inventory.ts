import { inventoryQuerySchema, makeListInventory } from '../../shared/app/inventory.js';
import { inventoryDeps } from '../dependencies.js';
import { httpHandler, requirePrincipal } from '../http.js';

const listInventory = makeListInventory(inventoryDeps());

/** GET /v1/inventory?group=: the tenant's nodes with their status as of now. */
export const handler = httpHandler(async (request) => {
  const principal = requirePrincipal(request);
  return { status: 200, body: { nodes: await listInventory(principal, inventoryQuerySchema.parse(request.query)) } };
});
