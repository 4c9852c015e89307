import { makeRemoveNode, nodePathSchema } from '../../shared/app/inventory.js';
import { inventoryDeps } from '../dependencies.js';
import { httpHandler, requirePrincipal } from '../http.js';

const removeNode = makeRemoveNode(inventoryDeps());

/** DELETE /v1/inventory/nodes/{id} (admin): 404 when the tenant has no node by that id. */
export const handler = httpHandler(async (request) => {
  const principal = requirePrincipal(request);
  const { id } = nodePathSchema.parse(request.path);
  return { status: 200, body: await removeNode(principal, id) };
});
