import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type DocumentedRoute, openApiDocument, UndocumentedRouteError } from '../../../shared/resources/openapi.js';
import { ROUTES } from '../../../shared/resources/routes.js';

const ROOT = join(import.meta.dirname, '..', '..', '..');
const document = openApiDocument(ROUTES, { version: '1.0.0' });
type Operation = {
  parameters: Array<{ name: string; in: string; required: boolean }>;
  requestBody?: { content: Record<string, { schema: { $ref: string } }> };
  responses: Record<string, { content?: Record<string, { schema: { $ref: string } }> }>;
  security?: unknown[];
};
const paths = document.paths as Record<string, Record<string, Operation>>;
const schemas = (document.components as { schemas: Record<string, unknown> }).schemas;

/** Runs Redocly CLI's linter on a document, offline (no telemetry, no update check). */
function lint(doc: unknown): { status: number | null; problems: Array<{ severity: string; message: string }> } {
  const dir = mkdtempSync(join(tmpdir(), 'capstan-openapi-'));
  try {
    writeFileSync(join(dir, 'openapi.json'), JSON.stringify(doc));
    const result = spawnSync(
      process.execPath,
      [
        join(ROOT, 'node_modules', '@redocly', 'cli', 'bin', 'cli.js'),
        'lint',
        'openapi.json',
        '--config',
        join(ROOT, 'redocly.yaml'),
        '--format',
        'json',
      ],
      {
        cwd: dir,
        encoding: 'utf8',
        env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', CI: 'true' },
        timeout: 60_000,
      },
    );
    const report = JSON.parse(result.stdout) as { problems: Array<{ severity: string; message: string }> };
    return { status: result.status, problems: report.problems };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('the OpenAPI document', () => {
  it('passes the Redocly linter with no error and no warning', () => {
    const { status, problems } = lint(document);
    expect(problems).toEqual([]);
    expect(status).toBe(0);
  }, 60_000);

  it('fails the linter when a response refers to a schema that does not exist', () => {
    const broken = structuredClone(document) as { components: { schemas: Record<string, unknown> } };
    delete broken.components.schemas.Error;
    const { status, problems } = lint(broken);
    expect(status).not.toBe(0);
    expect(problems.some((p) => p.severity === 'error')).toBe(true);
  }, 60_000);

  it('is OpenAPI 3.1, whose schemas are JSON Schema 2020-12 as zod writes them', () => {
    expect(document.openapi).toBe('3.1.0');
  });

  it('has every route of the route table with its parameters, body and responses', () => {
    for (const route of ROUTES) {
      const operation = paths[route.path]?.[route.method.toLowerCase()];
      expect(operation, `${route.method} ${route.path}`).toBeDefined();
      if (!operation) continue;
      const pathParams = [...route.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
      expect(operation.parameters.filter((p) => p.in === 'path').map((p) => p.name)).toEqual(pathParams);
      for (const name of Object.keys(route.schemas.query?.shape ?? {}))
        expect(operation.parameters).toContainEqual(expect.objectContaining({ name, in: 'query' }));
      if (route.schemas.body) {
        const ref = operation.requestBody?.content['application/json']?.schema.$ref ?? '';
        expect(schemas[ref.split('/').at(-1) ?? '']).toBeDefined();
      } else {
        expect(operation.requestBody).toBeUndefined();
      }
      const success = operation.responses[String(route.schemas.response.status)];
      // A bundle or an artifact is answered as bytes, under its own media type.
      const ref = success?.content?.[route.schemas.response.contentType ?? 'application/json']?.schema.$ref ?? '';
      expect(schemas[ref.split('/').at(-1) ?? ''], `${route.handler} response`).toBeDefined();
      expect(operation.responses['500']?.content?.['application/json']?.schema.$ref).toBe('#/components/schemas/Error');
      if (route.authorized) expect(operation.responses['400']).toBeDefined();
      else expect(operation.security).toEqual([]);
    }
  });

  it('documents the Idempotency-Key header, the YAML runbook body and the error shape', () => {
    expect(paths['/v1/runs']?.post?.parameters).toContainEqual(
      expect.objectContaining({ name: 'Idempotency-Key', in: 'header', required: false }),
    );
    expect(Object.keys(paths['/v1/runbooks']?.post?.requestBody?.content ?? {})).toEqual([
      'application/json',
      'application/yaml',
    ]);
    expect(schemas.Error).toMatchObject({
      type: 'object',
      required: ['error'],
      properties: { error: { required: ['code', 'message'] } },
    });
  });

  it('describes a request body with the same constraints the handler parses with', () => {
    expect(schemas.CreateRunRequest).toMatchObject({
      required: ['runbookId'],
      additionalProperties: false,
      properties: { priority: { enum: ['low', 'normal', 'high', 'emergency'] } },
    });
  });
});

describe('the generator', () => {
  const route: DocumentedRoute = {
    method: 'GET',
    path: '/v1/things',
    handler: 'list-things',
    authorized: true,
    roles: [],
  };

  it('refuses a route added to the table without schemas', () => {
    expect(() => openApiDocument([...ROUTES, route], { version: '1' })).toThrow(UndocumentedRouteError);
    expect(() => openApiDocument([...ROUTES, route], { version: '1' })).toThrow(/GET \/v1\/things has no schemas/);
  });

  it('refuses a route whose path parameters its schemas do not describe', () => {
    const withParam: DocumentedRoute = {
      ...route,
      path: '/v1/things/{id}',
      schemas: { summary: 'a thing', response: { status: 200, schema: z.object({}) } },
    };
    expect(() => openApiDocument([withParam], { version: '1' })).toThrow(/path parameters \{id\}/);
  });
});
