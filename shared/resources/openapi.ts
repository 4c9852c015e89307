import { z } from 'zod';
import { errorBodySchema, type RouteSchemas } from './api-schemas.js';
import type { RouteSpec } from './routes.js';

type JsonObject = { [key: string]: unknown };

/** A route as the generator reads it; `schemas` is checked here, not trusted to the type. */
export type DocumentedRoute = Omit<RouteSpec, 'schemas'> & { readonly schemas?: RouteSchemas };

/** A route in the table that the document cannot describe. */
export class UndocumentedRouteError extends Error {
  constructor(route: Pick<RouteSpec, 'method' | 'path'>, why: string) {
    super(`route ${route.method} ${route.path} ${why}`);
    this.name = 'UndocumentedRouteError';
  }
}

/**
 * Builds components from zod schemas with zod's own JSON Schema output (draft 2020-12, the
 * dialect of OpenAPI 3.1). Each schema's local `$defs` (recursive JSON values) become components
 * of their own, so every `$ref` resolves from the document root.
 */
class Components {
  readonly schemas: Record<string, unknown> = {};

  add(name: string, schema: z.ZodType, io: 'input' | 'output'): { $ref: string } {
    const generated = z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any' }) as JsonObject;
    const { $schema: _dialect, $defs, ...body } = generated;
    const rename = (key: string) => `${name}_${key.replace(/[^A-Za-z0-9._-]/g, '')}`;
    const rewrite = (value: unknown): unknown => {
      if (Array.isArray(value)) return value.map(rewrite);
      if (value === null || typeof value !== 'object') return value;
      return Object.fromEntries(
        Object.entries(value).map(([k, v]) => [
          k,
          k === '$ref' && typeof v === 'string' && v.startsWith('#/$defs/')
            ? `#/components/schemas/${rename(v.slice('#/$defs/'.length))}`
            : rewrite(v),
        ]),
      );
    };
    for (const [key, def] of Object.entries(($defs ?? {}) as JsonObject)) this.schemas[rename(key)] = rewrite(def);
    this.schemas[name] = rewrite(body);
    return { $ref: `#/components/schemas/${name}` };
  }
}

/** `create-run` becomes `CreateRun`: component names from handler names. */
const pascal = (handler: string) =>
  handler
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((part) => part[0]?.toUpperCase() + part.slice(1))
    .join('');

/** The path template's parameters, in order. */
const pathParams = (path: string) => [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1] ?? '');

/** Parameters one by one, from an object schema of flat values (no `$defs`). */
function parameters(where: 'path' | 'query' | 'header', schema: z.ZodObject | undefined): JsonObject[] {
  if (!schema) return [];
  const generated = z.toJSONSchema(schema, {
    target: 'draft-2020-12',
    io: 'input',
    unrepresentable: 'any',
  }) as JsonObject;
  const properties = (generated.properties ?? {}) as Record<string, JsonObject>;
  const required = new Set((generated.required ?? []) as string[]);
  return Object.entries(properties).map(([key, property]) => {
    const { description, ...rest } = property;
    return {
      name: key,
      in: where,
      required: where === 'path' || required.has(key),
      ...(typeof description === 'string' && { description }),
      schema: rest,
    };
  });
}

const ERROR_STATUSES: Record<string, string> = {
  '400': 'The request is not valid: `details` names each field',
  '401': 'No valid bearer token',
  '403': 'The caller lacks a role this route needs',
  '404': 'Not found, or not visible to the caller’s tenant',
  '409': 'Conflicts with the stored state',
  '429': 'Throttled by API Gateway: retry with back-off',
  '500': 'Something went wrong; the body is generic and the detail is in the logs',
};

/**
 * The OpenAPI 3.1 document of the REST API, generated from the route table and the zod schemas
 * the handlers parse with. Throws {@link UndocumentedRouteError} for a route without schemas, or
 * whose path parameters and schemas disagree, so an undocumented route cannot ship.
 */
export function openApiDocument(routes: readonly DocumentedRoute[], info: { version: string }): JsonObject {
  const components = new Components();
  components.add('Error', errorBodySchema, 'output');
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const schemas = route.schemas;
    if (!schemas) throw new UndocumentedRouteError(route, 'has no schemas: give its entry in routes.ts `schemas`');
    const declared = pathParams(route.path);
    const described = Object.keys(schemas.params?.shape ?? {});
    if (declared.join() !== described.join())
      throw new UndocumentedRouteError(
        route,
        `has path parameters {${declared.join(', ')}} but its params schema describes {${described.join(', ')}}`,
      );
    const name = pascal(route.handler);
    const responses: Record<string, unknown> = {};
    const success = components.add(`${name}Response`, schemas.response.schema, 'output');
    for (const status of [schemas.response.status, schemas.response.alsoStatus].flatMap((s) => s ?? [])) {
      responses[String(status)] = {
        description:
          status === schemas.response.status
            ? schemas.summary
            : (schemas.response.alsoDescription ?? 'The same as above, already stored'),
        content: { [schemas.response.contentType ?? 'application/json']: { schema: success } },
      };
    }
    const errors = route.authorized ? Object.keys(ERROR_STATUSES) : ['429', '500'];
    if (route.handler === 'health')
      responses['503'] = {
        description: 'A component does not answer',
        content: { 'application/json': { schema: success } },
      };
    for (const status of errors)
      responses[status] = {
        description: ERROR_STATUSES[status],
        content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
      };
    const body = schemas.body && components.add(`${name}Request`, schemas.body.schema, 'input');
    const operation: JsonObject = {
      operationId: name.charAt(0).toLowerCase() + name.slice(1),
      summary: schemas.summary,
      description: route.authorized ? `Roles: ${route.roles.join(', ')}.` : 'Public: no token needed.',
      tags: [route.path.split('/')[2] ?? 'api'],
      ...(route.authorized ? {} : { security: [] }),
      parameters: [
        ...parameters('path', schemas.params),
        ...parameters('query', schemas.query),
        ...parameters('header', schemas.headers),
      ],
      ...(body && {
        requestBody: {
          required: true,
          content: {
            'application/json': { schema: body },
            ...(schemas.body?.yaml && { 'application/yaml': { schema: body } }),
          },
        },
      }),
      responses,
    };
    const path = (paths[route.path] ??= {});
    path[route.method.toLowerCase()] = operation;
  }
  const tags = [...new Set(routes.map((r) => r.path.split('/')[2] ?? 'api'))].map((tag) => ({
    name: tag,
    description: `The ${tag} routes`,
  }));
  return {
    openapi: '3.1.0',
    info: {
      title: 'Capstan API',
      version: info.version,
      description:
        'Runbooks, runs, approvals and workers. Errors are `{"error": {"code", "message", "details"?}}`. ' +
        'Live events: the WebSocket API (`?token=<JWT>`, then `{"action": "subscribe", "runId", "lastEventId"?}`).',
      license: { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' },
    },
    servers: [{ url: '/', description: 'The API root; every path starts with /v1' }],
    security: [{ bearer: [] }],
    tags,
    paths,
    components: {
      schemas: components.schemas,
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } },
    },
  };
}
