import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Principal } from '../../shared/domain/entities.js';
import { call, type Handler, proxyEvent } from '../support/api-events.js';
import { startTestDynamo, type TestDynamo } from '../support/local-dynamodb.js';

const EXAMPLES = join(import.meta.dirname, '../../examples/runbooks');
const operator: Principal = { subject: 'olive', tenantId: 'acme', roles: ['operator'] };
const viewer: Principal = { subject: 'victor', tenantId: 'acme', roles: ['viewer'] };
const stranger: Principal = { subject: 'sam', tenantId: 'globex', roles: ['admin'] };

let dynamo: TestDynamo;
let create: Handler;
let list: Handler;
let get: Handler;

beforeAll(async () => {
  dynamo = await startTestDynamo();
  // Handlers read their configuration at import, so they are imported once the tables exist.
  create = (await import('../../functions/api/create-runbook.js')).handler as unknown as Handler;
  list = (await import('../../functions/api/list-runbooks.js')).handler as unknown as Handler;
  get = (await import('../../functions/api/get-runbook.js')).handler as unknown as Handler;
});

afterAll(async () => {
  await dynamo?.local.stop();
});

/** GET /v1/runbooks/{id}, optionally at a version. */
const getRunbook = (id: string, principal: Principal, version?: string) =>
  call(
    get,
    proxyEvent({
      method: 'GET',
      path: `/v1/runbooks/${id}`,
      principal,
      pathParameters: { id },
      ...(version === undefined ? {} : { query: { version } }),
    }),
  );

const yaml = (body: string, principal: Principal = operator) =>
  proxyEvent({
    method: 'POST',
    path: '/v1/runbooks',
    principal,
    body,
    headers: { 'Content-Type': 'application/yaml' },
  });

describe('the runbooks API on DynamoDB Local', () => {
  const restart = readFileSync(join(EXAMPLES, 'restart-web.yaml'), 'utf8');

  it('registers a YAML runbook as version 1 and gives the same version for the same content', async () => {
    const first = await call(create, yaml(restart));
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({ id: 'restart-web', version: 1, digest: expect.stringMatching(/^sha256:/) });
    const again = await call(create, yaml(restart));
    expect(again).toEqual({ status: 200, body: first.body });
  });

  it('gives the same version to the same runbook sent as JSON', async () => {
    const { parse } = await import('yaml');
    const asJson = JSON.stringify(parse(restart));
    const response = await call(
      create,
      proxyEvent({
        method: 'POST',
        path: '/v1/runbooks',
        principal: operator,
        body: asJson,
        headers: { 'content-type': 'application/json' },
      }),
    );
    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({ id: 'restart-web', version: 1 });
  });

  it('stores changed content as the next version', async () => {
    const response = await call(create, yaml(restart.replace('retries: 3', 'retries: 4')));
    expect(response).toMatchObject({ status: 201, body: { id: 'restart-web', version: 2 } });
    const latest = await getRunbook('restart-web', viewer);
    expect(latest.body).toMatchObject({ runbookId: 'restart-web', version: 2 });
    const first = await getRunbook('restart-web', viewer, '1');
    expect(first.body).toMatchObject({ version: 1 });
  });

  it('numbers concurrent registrations of different content without a gap or a duplicate', async () => {
    const source = (n: number) =>
      `name: busy\nenvironment: dev\nsandbox_profile: dev-flex\nsteps:\n  - { id: s, backend: test, action: sleep, params: { ms: ${n} } }\n`;
    const responses = await Promise.all([1, 2, 3, 4].map((n) => call(create, yaml(source(n)))));
    expect(responses.map((r) => r.status)).toEqual([201, 201, 201, 201]);
    expect(responses.map((r) => r.body.version).sort()).toEqual([1, 2, 3, 4]);
  });

  it('refuses an invalid runbook with 400, naming each field and its line', async () => {
    const response = await call(
      create,
      yaml(
        'name: broken\nenvironment: dev\nsandbox_profile: dev-flex\nsteps:\n  - id: a\n    backend: test\n    action: sleep\n    params: { ms: 5 }\n    timeout: 10 minutes\n',
      ),
    );
    expect(response.status).toBe(400);
    expect(response.body).toMatchObject({
      error: {
        code: 'VALIDATION_FAILED',
        details: [{ path: 'steps[0].timeout', line: 9, message: expect.stringMatching(/not a duration/) }],
      },
    });
  });

  it('refuses a body that is not JSON and an unsupported content type with 400', async () => {
    const notJson = await call(
      create,
      proxyEvent({
        method: 'POST',
        path: '/v1/runbooks',
        principal: operator,
        body: '{nope',
        headers: { 'content-type': 'application/json' },
      }),
    );
    expect(notJson.status).toBe(400);
    const xml = await call(
      create,
      proxyEvent({
        method: 'POST',
        path: '/v1/runbooks',
        principal: operator,
        body: '<x/>',
        headers: { 'content-type': 'application/xml' },
      }),
    );
    expect(xml).toMatchObject({ status: 400, body: { error: { details: [{ path: 'content-type' }] } } });
  });

  it('lets a viewer read but not register', async () => {
    const response = await call(create, yaml(restart, viewer));
    expect(response).toMatchObject({ status: 403, body: { error: { code: 'FORBIDDEN' } } });
  });

  it("hides one tenant's runbooks from another", async () => {
    const response = await getRunbook('restart-web', stranger);
    expect(response).toMatchObject({ status: 404, body: { error: { code: 'NOT_FOUND' } } });
    const listing = await call(list, proxyEvent({ method: 'GET', path: '/v1/runbooks', principal: stranger }));
    expect(listing.body).toEqual({ items: [] });
  });

  it('lists runbooks a page at a time with a cursor', async () => {
    const firstPage = await call(
      list,
      proxyEvent({ method: 'GET', path: '/v1/runbooks', principal: viewer, query: { limit: '1' } }),
    );
    expect(firstPage.status).toBe(200);
    expect(firstPage.body.items).toHaveLength(1);
    expect(firstPage.body.nextCursor).toEqual(expect.any(String));
    const secondPage = await call(
      list,
      proxyEvent({
        method: 'GET',
        path: '/v1/runbooks',
        principal: viewer,
        query: { limit: '1', cursor: String(firstPage.body.nextCursor) },
      }),
    );
    const ids = [
      ...(firstPage.body.items as Array<{ runbookId: string }>),
      ...(secondPage.body.items as Array<{ runbookId: string }>),
    ].map((i) => i.runbookId);
    expect(new Set(ids)).toEqual(new Set(['busy', 'restart-web']));
  });

  it('refuses a forged cursor and a bad limit with 400', async () => {
    const forged = await call(
      list,
      proxyEvent({ method: 'GET', path: '/v1/runbooks', principal: viewer, query: { cursor: 'bm90LWEtY3Vyc29y' } }),
    );
    expect(forged).toMatchObject({ status: 400, body: { error: { details: [{ path: 'cursor' }] } } });
    const tooMany = await call(
      list,
      proxyEvent({ method: 'GET', path: '/v1/runbooks', principal: viewer, query: { limit: '1000' } }),
    );
    expect(tooMany).toMatchObject({ status: 400, body: { error: { details: [{ path: 'limit' }] } } });
  });

  it('answers 401 when the authorizer context is missing', async () => {
    const response = await call(list, proxyEvent({ method: 'GET', path: '/v1/runbooks' }));
    expect(response.status).toBe(401);
  });
});
