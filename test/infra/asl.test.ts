import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import {
  DEFINITION_FUNCTIONS,
  loadRunInterpreterDefinition,
  substituteDefinition,
} from '../../shared/workflow/definition.js';

type AslValidator = (definition: unknown) => { isValid: boolean; errors: Array<{ message?: string }> };
const validate = createRequire(import.meta.url)('asl-validator') as AslValidator;

const arns = Object.fromEntries(
  Object.keys(DEFINITION_FUNCTIONS).map((key) => [key, `arn:aws:lambda:eu-west-1:123456789012:function:${key}`]),
) as Record<keyof typeof DEFINITION_FUNCTIONS, string>;

describe('the run interpreter definition', () => {
  const definition = JSON.parse(substituteDefinition(loadRunInterpreterDefinition(), arns)) as {
    States: Record<string, { Type: string; Resource?: string; TimeoutSeconds?: number }>;
  };

  it('is valid Amazon States Language', () => {
    const result = validate(definition);
    expect(result.errors).toEqual([]);
    expect(result.isValid).toBe(true);
  });

  it('gives every waiting task an explicit timeout', () => {
    const waiting = Object.entries(definition.States).filter(([, s]) => s.Resource?.endsWith('.waitForTaskToken'));
    expect(waiting.map(([name]) => name).sort()).toEqual(['AwaitApproval', 'Dispatch', 'Paused']);
    for (const [, state] of waiting) expect(state.TimeoutSeconds).toBeGreaterThan(0);
    // A gate's default hard limit (24 h) ends before its task times out; the reconciler ends it.
    expect(definition.States.AwaitApproval?.TimeoutSeconds).toBeGreaterThan(86_400);
  });

  it('refuses to substitute when a function is missing', () => {
    const { PlanFunctionArn: _omitted, ...partial } = arns;
    expect(() => substituteDefinition(loadRunInterpreterDefinition(), partial as typeof arns)).toThrow(
      /PlanFunctionArn/,
    );
  });
});
