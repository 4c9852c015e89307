import type { Stack } from 'aws-cdk-lib';
import type { TableKey } from '../shared/resources/tables.js';

/**
 * Physical names of the resources both stacks address. Naming them lets the stateless
 * stack refer to the stateful one by name, so grants carry plain ARNs and no stack
 * export ties the two together.
 */
export function physicalNames(prefix: string, stack: Stack) {
  return {
    tables: {
      state: `${prefix}-state`,
      events: `${prefix}-events`,
      connections: `${prefix}-connections`,
    } satisfies Record<TableKey, string>,
    evidenceBucket: `${prefix}-evidence-${stack.account}-${stack.region}`,
    stateMachine: `${prefix}-run-interpreter`,
  };
}
