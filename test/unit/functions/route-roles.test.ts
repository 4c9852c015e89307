import { describe, expect, it } from 'vitest';
import { httpHandler } from '../../../functions/http.js';
import type { Principal } from '../../../shared/domain/entities.js';
import { routeFor } from '../../../shared/resources/routes.js';
import { call, type Handler, proxyEvent } from '../../support/api-events.js';

const viewer: Principal = { subject: 'vic', tenantId: 'acme', roles: ['viewer'] };
const operator: Principal = { subject: 'olive', tenantId: 'acme', roles: ['operator'] };

function handlerCounting(): { handler: Handler; calls: () => number } {
  let calls = 0;
  const handler = httpHandler(async () => {
    calls++;
    return { status: 202, body: { ok: true } };
  }) as unknown as Handler;
  return { handler, calls: () => calls };
}

describe('the route table as the one role check', () => {
  it('finds a route by its template or by a concrete path', () => {
    expect(routeFor('POST', '/v1/runs/{id}/cancel')?.handler).toBe('cancel-run');
    expect(routeFor('POST', '/v1/runs/run-1/cancel')?.handler).toBe('cancel-run');
    expect(routeFor('GET', '/v1/runs/run-1/cancel')).toBeUndefined();
  });

  it('refuses a caller without one of the route roles before the use case runs', async () => {
    const { handler, calls } = handlerCounting();
    const refused = await call(
      handler,
      proxyEvent({ method: 'POST', path: '/v1/runs/{id}/cancel', principal: viewer }),
    );
    expect(refused).toMatchObject({ status: 403, body: { error: { code: 'FORBIDDEN' } } });
    expect(calls()).toBe(0);
  });

  it('lets a caller with one of the route roles through', async () => {
    const { handler, calls } = handlerCounting();
    const allowed = await call(
      handler,
      proxyEvent({ method: 'POST', path: '/v1/runs/{id}/cancel', principal: operator }),
    );
    expect(allowed.status).toBe(202);
    expect(calls()).toBe(1);
  });

  it('refuses a request for a route the table does not have', async () => {
    const { handler, calls } = handlerCounting();
    const refused = await call(handler, proxyEvent({ method: 'DELETE', path: '/v1/runs', principal: operator }));
    expect(refused.status).toBe(403);
    expect(calls()).toBe(0);
  });
});
