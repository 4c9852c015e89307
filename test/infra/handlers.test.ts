import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');
/** Modules under functions/ that are shared by handlers, not handlers themselves. */
const NOT_HANDLERS = new Set([
  'functions/http.ts',
  'functions/dependencies.ts',
  'functions/observability.ts',
  'functions/workflow/task-input.ts',
]);

function handlerModules(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return handlerModules(path);
    const name = relative(ROOT, path);
    return entry.name.endsWith('.ts') && !NOT_HANDLERS.has(name) ? [name] : [];
  });
}

const ENV = {
  CAPSTAN_STATE_TABLE: 'capstan-state',
  CAPSTAN_EVENTS_TABLE: 'capstan-events',
  CAPSTAN_CONNECTIONS_TABLE: 'capstan-connections',
  CAPSTAN_EVIDENCE_BUCKET: 'capstan-evidence',
  CAPSTAN_EVIDENCE_KEY_ID: 'arn:aws:kms:us-east-1:000000000000:key/evidence',
  CAPSTAN_STATE_MACHINE_ARN: 'arn:aws:states:us-east-1:000000000000:stateMachine:capstan-run-interpreter',
  CAPSTAN_WS_ENDPOINT: 'http://127.0.0.1:9/ws',
  CAPSTAN_JWT_ISSUER: 'https://auth.example.com/',
  CAPSTAN_JWKS_URL: 'https://auth.example.com/.well-known/jwks.json',
  AWS_REGION: 'us-east-1',
  POWERTOOLS_METRICS_DISABLED: 'true',
};

describe('the deployed handlers', () => {
  const modules = handlerModules(join(ROOT, 'functions'));

  it('finds the handler modules', () => {
    expect(modules).toContain('functions/ticket-ingest.ts');
    expect(modules).toContain('functions/api/webhook.ts');
  });

  it.each(modules)('%s exports a handler that is not a "not implemented" stub', async (module) => {
    Object.assign(process.env, ENV);
    const loaded = (await import(join(ROOT, module))) as { handler?: unknown };
    expect(typeof loaded.handler).toBe('function');
    expect(String(loaded.handler)).not.toMatch(/not implemented/i);
    expect(readFileSync(join(ROOT, module), 'utf8')).not.toMatch(/not implemented/i);
  });

  it.each(modules)('%s is wrapped by the shared observability middleware', async (module) => {
    Object.assign(process.env, ENV);
    const loaded = (await import(join(ROOT, module))) as { handler?: unknown };
    const { isObserved } = await import('../../functions/observability.js');
    expect(isObserved(loaded.handler)).toBe(true);
  });
});
