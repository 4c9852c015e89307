import { z } from 'zod';
import { declareNodeBodySchema, inventoryQuerySchema, nodePathSchema } from '../app/inventory.js';
import { inventoryNodeSchema } from '../domain/inventory.js';

/** Request and response schemas of the inventory routes. */
export const inventoryListSchema = z.looseObject({ nodes: z.array(inventoryNodeSchema) });
export const declaredNodeSchema = z.looseObject({ node: inventoryNodeSchema, created: z.boolean() });
export const removedNodeSchema = z.looseObject({ id: z.string(), removed: z.literal(true) });
export { declareNodeBodySchema, inventoryQuerySchema, nodePathSchema };
