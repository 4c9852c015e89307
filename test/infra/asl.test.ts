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

  it("gives Dispatch Plan's whole result: its input resolves whether or not Plan carried the run", () => {
    const dispatch = definition.States.Dispatch as unknown as { Parameters: { Payload: Record<string, string> } };
    // A Plan result with the decision alone, nothing carried.
    const earlier = { runId: 'run-1', tenantId: 'acme', plan: { decision: { action: 'dispatch' } }, faults: {} };
    const resolve = (path: string): unknown =>
      path
        .slice(2)
        .split('.')
        .reduce<unknown>((at, key) => (at as Record<string, unknown> | undefined)?.[key], earlier);
    const paths = Object.entries(dispatch.Parameters.Payload).filter(
      ([key, path]) => key.endsWith('.$') && path.startsWith('$.'),
    );
    expect(paths.map(([key]) => key)).toContain('plan.$');
    for (const [key, path] of paths) expect(resolve(path), `${key} ${path}`).toBeDefined();
  });

  it('refuses to substitute when a function is missing', () => {
    const { PlanFunctionArn: _omitted, ...partial } = arns;
    expect(() => substituteDefinition(loadRunInterpreterDefinition(), partial as typeof arns)).toThrow(
      /PlanFunctionArn/,
    );
  });
});
