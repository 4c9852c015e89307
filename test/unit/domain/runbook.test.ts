import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../../shared/domain/errors.js';
import { parseRunbookObject, resolveInputs, runbookDigest } from '../../../shared/domain/runbook.js';
import { parseRunbookSource } from '../../../shared/domain/runbook-source.js';

const EXAMPLES = join(import.meta.dirname, '../../../examples/runbooks');

/** A valid minimal runbook document to vary in each case. */
function base(): Record<string, unknown> {
  return {
    name: 'demo',
    environment: 'dev',
    sandbox_profile: 'dev-flex',
    steps: [
      { id: 'one', backend: 'test', action: 'echo', params: { message: 'hi' } },
      { id: 'two', backend: 'test', action: 'sleep', params: { ms: 10 }, timeout: '5s' },
    ],
  };
}

function issuesOf(doc: unknown): Array<{ path: string; message: string }> {
  try {
    parseRunbookObject(doc);
  } catch (error) {
    if (error instanceof ValidationError) return [...error.details];
    throw error;
  }
  throw new Error('expected the runbook to be rejected');
}

function withStep(patch: Record<string, unknown>, index = 1): Record<string, unknown> {
  const doc = base();
  const steps = doc.steps as Record<string, unknown>[];
  steps[index] = { ...steps[index], ...patch };
  return doc;
}

describe('example runbooks', () => {
  const files = readdirSync(EXAMPLES).filter((f) => /\.(ya?ml|json)$/.test(f));

  it('include at least four runbooks', () => {
    expect(files.length).toBeGreaterThanOrEqual(4);
  });

  it.each(files)('validates %s', (file) => {
    const source = readFileSync(join(EXAMPLES, file), 'utf8');
    const runbook = parseRunbookSource(source, file.endsWith('.json') ? 'json' : 'yaml');
    expect(runbook.name).toBe(file.replace(/\.(ya?ml|json)$/, ''));
    expect(runbook.phases.length).toBeGreaterThan(0);
  });

  it('needs two approvers for the production credential rotation (high blast radius, per-step validation)', () => {
    const runbook = parseRunbookSource(readFileSync(join(EXAMPLES, 'rotate-db-credentials.yaml'), 'utf8'));
    expect(runbook.environment).toBe('prod');
    expect(runbook.validation_mode).toBe('per_step');
    expect(runbook.phases[0]?.steps.find((s) => s.id === 'rotate')?.blast_radius).toBe('high');
  });
});

describe('parseRunbookObject', () => {
  it('normalises steps into one phase named main with defaults filled in', () => {
    const runbook = parseRunbookObject(base());
    expect(runbook.phases).toHaveLength(1);
    expect(runbook.phases[0]).toMatchObject({ id: 'main', mode: 'barrier' });
    expect(runbook.phases[0]?.steps[0]).toMatchObject({
      retries: 0,
      condition: 'on_success',
      blast_radius: 'low',
      timeout: '5m',
    });
    expect(runbook.strategy).toBe('fail-fast');
    expect(runbook.validation_mode).toBe('critical_only');
  });

  it('defaults validation to per_step in prod', () => {
    const runbook = parseRunbookObject({ ...base(), environment: 'prod', sandbox_profile: 'prod-standard' });
    expect(runbook.validation_mode).toBe('per_step');
  });

  it('parses its own normal form again to the same runbook', () => {
    const runbook = parseRunbookObject(base());
    expect(parseRunbookObject(runbook)).toEqual(runbook);
  });

  const badRunbooks: Array<[string, Record<string, unknown>, string, RegExp]> = [
    ['an unknown step field', withStep({ colour: 'red' }), 'steps[1].colour', /unknown field 'colour'/],
    ['an unknown top-level field', { ...base(), owner: 'x' }, 'owner', /unknown field/],
    ['a bad duration', withStep({ timeout: '10 minutes' }), 'steps[1].timeout', /not a duration/],
    ['a duplicate step id', withStep({ id: 'one' }), 'steps[1].id', /duplicate step id 'one'/],
    [
      'a rollback on a rollback',
      withStep({
        rollback: {
          backend: 'test',
          action: 'echo',
          params: { message: 'x' },
          rollback: { backend: 'test', action: 'echo' },
        },
      }),
      'steps[1].rollback.rollback',
      /rollback of its own/,
    ],
    [
      'a phase inside a phase',
      {
        ...base(),
        steps: undefined,
        phases: [
          {
            id: 'outer',
            mode: 'pipeline',
            steps: [{ id: 'a', backend: 'test', action: 'echo', params: { message: 'x' } }],
            phases: [],
          },
        ],
      },
      'phases[0].phases',
      /cannot be nested/,
    ],
    ['an unknown backend', withStep({ backend: 'ssh', action: 'exec' }), 'steps[1].backend', /unknown backend 'ssh'/],
    ['an unknown action', withStep({ action: 'explode' }), 'steps[1].action', /no action 'explode'/],
    ['bad params', withStep({ params: { ms: 'soon' } }), 'steps[1].params.ms', /number/],
    [
      'a shell string instead of params',
      withStep({ params: { ms: 5, command: 'rm -rf /' } }),
      'steps[1].params.command',
      /unknown field/,
    ],
    [
      'an undeclared input',
      withStep({ action: 'echo', params: { message: '{{ inputs.nope }}' } }),
      'steps[1].params.message',
      /not declared/,
    ],
    [
      'an expression placeholder',
      withStep({ action: 'echo', params: { message: '{{ process.env.HOME }}' } }),
      'steps[1].params.message',
      /only \{\{ inputs/,
    ],
    [
      'steps and phases together',
      {
        ...base(),
        phases: [{ id: 'p', steps: [{ id: 'z', backend: 'test', action: 'echo', params: { message: 'x' } }] }],
      },
      '(root)',
      /either 'steps' or 'phases'/,
    ],
    [
      'a profile for another environment',
      { ...base(), sandbox_profile: 'prod-critical' },
      'sandbox_profile',
      /is for prod/,
    ],
    ['a bad blast radius', withStep({ blast_radius: 'huge' }), 'steps[1].blast_radius', /low|medium|high/],
    [
      'final_only with a risky step',
      { ...withStep({ blast_radius: 'high' }), validation_mode: 'final_only' },
      'validation_mode',
      /final_only/,
    ],
    [
      'a bad max_concurrency',
      withStep({ max_concurrency: '150%' }),
      'steps[1].max_concurrency',
      /percentage|whole number/,
    ],
    ['a bad condition', withStep({ condition: 'sometimes' }), 'steps[1].condition', /always|on_success/],
    ['a bad step id', withStep({ id: 'Has Spaces' }), 'steps[1].id', /lower-case/],
    [
      'a pipeline whose steps target different things',
      {
        ...base(),
        steps: undefined,
        phases: [
          {
            id: 'p',
            mode: 'pipeline',
            steps: [
              {
                id: 'a',
                backend: 'test',
                action: 'echo',
                params: { message: 'x' },
                target: { group: 'web' },
              },
              { id: 'b', backend: 'test', action: 'echo', params: { message: 'x' }, target: { group: 'db' } },
            ],
          },
        ],
      },
      'phases[0].steps[1].target',
      /same target/,
    ],
    [
      'a destructive step without rollback in a profile that requires one',
      {
        name: 'x',
        environment: 'prod',
        sandbox_profile: 'prod-standard',
        steps: [{ id: 'a', backend: 'script', action: 'run', params: { script: 'service-restart' } }],
      },
      'steps[0].rollback',
      /requires a rollback/,
    ],
    [
      'an input default of the wrong type',
      { ...base(), inputs: { n: { type: 'number', default: 'five' } } },
      'inputs.n.default',
      /must be a number/,
    ],
  ];

  it.each(badRunbooks)('rejects %s, naming the field', (_label, doc, path, message) => {
    const issues = issuesOf(doc);
    const issue = issues.find((i) => i.path === path);
    expect(issue, `issues were ${JSON.stringify(issues)}`).toBeDefined();
    expect(issue?.message).toMatch(message);
  });

  it('checks params that use an input without a default only when the run gives the input', () => {
    const doc = {
      ...withStep({ params: { ms: '{{ inputs.delay }}' } }),
      inputs: { delay: { type: 'number' } },
    };
    expect(() => parseRunbookObject(doc)).not.toThrow();
  });
});

describe('parseRunbookSource', () => {
  it('gives the line and column of the offending field in YAML', () => {
    const source = [
      'name: demo',
      'environment: dev',
      'sandbox_profile: dev-flex',
      'steps:',
      '  - id: one',
      '    backend: test',
      '    action: sleep',
      '    params: { ms: 5 }',
      '    timeout: forever',
      '',
    ].join('\n');
    try {
      parseRunbookSource(source);
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(ValidationError);
      expect((error as ValidationError).details[0]).toMatchObject({
        path: 'steps[0].timeout',
        line: 9,
        column: 14,
      });
    }
  });

  it('reports YAML syntax errors with their line', () => {
    expect(() => parseRunbookSource('name: demo\nsteps: [\n')).toThrow(ValidationError);
    try {
      parseRunbookSource('name: demo\n  bad: : indent\n');
    } catch (error) {
      expect((error as ValidationError).details[0]?.line).toBeGreaterThanOrEqual(1);
    }
  });

  it('rejects duplicate keys rather than keeping the last one', () => {
    expect(() => parseRunbookSource('name: a\nname: b\n')).toThrow(/not valid YAML/);
  });

  it('gives the same digest for the same runbook in YAML and in JSON', () => {
    const yaml = parseRunbookSource(
      'name: demo\nenvironment: dev\nsandbox_profile: dev-flex\nsteps:\n  - { id: one, backend: test, action: echo, params: { message: hi } }\n',
    );
    const json = parseRunbookSource(
      JSON.stringify({
        steps: [{ params: { message: 'hi' }, action: 'echo', backend: 'test', id: 'one' }],
        sandbox_profile: 'dev-flex',
        environment: 'dev',
        name: 'demo',
      }),
      'json',
    );
    expect(runbookDigest(yaml)).toBe(runbookDigest(json));
    expect(runbookDigest(yaml)).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  it('gives a different digest when anything changes', () => {
    const a = parseRunbookObject(base());
    const b = parseRunbookObject(withStep({ retries: 1 }));
    expect(runbookDigest(a)).not.toBe(runbookDigest(b));
  });
});

describe('resolveInputs', () => {
  const runbook = parseRunbookObject({
    ...base(),
    inputs: {
      service: { type: 'string', default: 'nginx' },
      count: { type: 'number' },
      mode: { type: 'string', enum: ['fast', 'slow'], default: 'fast' },
    },
  });

  it('fills defaults and keeps given values', () => {
    expect(resolveInputs(runbook, { count: 3 })).toEqual({ service: 'nginx', count: 3, mode: 'fast' });
  });

  it('names each bad input', () => {
    try {
      resolveInputs(runbook, { service: 5, extra: true, mode: 'medium' });
      expect.unreachable();
    } catch (error) {
      const paths = (error as ValidationError).details.map((i) => i.path).sort();
      expect(paths).toEqual(['inputs.count', 'inputs.extra', 'inputs.mode', 'inputs.service']);
    }
  });
});
