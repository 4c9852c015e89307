import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { lambdaXRayTracing } from '../../../shared/config.js';

const ROOT = join(import.meta.dirname, '..', '..', '..');

/** The X-Ray SDK's context namespaces a fresh process holds after loading the SDK clients and the Lambda middleware. */
async function namespacesAfterImport(env: Record<string, string>): Promise<string[]> {
  const script = [
    `await import(${JSON.stringify(join(ROOT, 'shared/adapters/aws-clients.ts'))});`,
    `await import(${JSON.stringify(join(ROOT, 'functions/observability.ts'))});`,
    'console.log(JSON.stringify(Object.keys(process.namespaces ?? {})));',
  ].join('\n');
  const clean = Object.fromEntries(
    Object.entries(process.env).filter(
      ([name]) => !['AWS_EXECUTION_ENV', 'POWERTOOLS_TRACE_ENABLED', 'AWS_SAM_LOCAL'].includes(name),
    ),
  );
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--import', 'tsx', '--input-type=module', '--eval', script],
    { cwd: ROOT, env: { ...clean, ...env } },
  );
  return JSON.parse(stdout.trim().split('\n').at(-1) ?? '[]') as string[];
}

describe('X-Ray tracing', () => {
  it('is on in a Lambda function unless turned off', () => {
    expect(lambdaXRayTracing({ AWS_EXECUTION_ENV: 'AWS_Lambda_nodejs22.x' })).toBe(true);
    expect(lambdaXRayTracing({ AWS_EXECUTION_ENV: 'AWS_Lambda_nodejs22.x', POWERTOOLS_TRACE_ENABLED: 'FALSE' })).toBe(
      false,
    );
    expect(lambdaXRayTracing({ AWS_EXECUTION_ENV: 'AWS_Lambda_nodejs22.x', AWS_SAM_LOCAL: 'true' })).toBe(false);
    expect(lambdaXRayTracing({ AWS_EXECUTION_ENV: 'AWS_Lambda_amplify-mock' })).toBe(false);
  });

  it('is off on Fargate and locally, where spans go through withSpan', () => {
    expect(lambdaXRayTracing({ AWS_EXECUTION_ENV: 'AWS_ECS_FARGATE' })).toBe(false);
    expect(lambdaXRayTracing({})).toBe(false);
  });

  it('leaves the X-Ray SDK and its async hooks unloaded where it is off, and loads them in Lambda', async () => {
    // The SDK's hooks track every promise of the process once it is imported, traced or not.
    expect(await namespacesAfterImport({ AWS_EXECUTION_ENV: 'AWS_ECS_FARGATE' })).toEqual([]);
    expect(await namespacesAfterImport({ AWS_EXECUTION_ENV: 'AWS_Lambda_nodejs22.x' })).toEqual(['AWSXRay']);
  }, 30_000);
});
