import { declareNodeBodySchema, makeDeclareNode, nodePathSchema } from '../../shared/app/inventory.js';
import { inventoryDeps } from '../dependencies.js';
import { httpHandler, parseJsonBody, requirePrincipal } from '../http.js';

const declareNode = makeDeclareNode(inventoryDeps());

/** PUT /v1/inventory/nodes/{id} (admin): 201 when declared, 200 when replaced, 409 for an agent node. */
export const handler = httpHandler(async (request) => {
  const principal = requirePrincipal(request);
  const { id } = nodePathSchema.parse(request.path);
  const result = await declareNode(principal, id, parseJsonBody(request, declareNodeBodySchema));
  return { status: result.created ? 201 : 200, body: result };
});
