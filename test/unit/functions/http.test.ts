import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { errorResponse } from '../../../functions/http.js';
import { parseConfig } from '../../../shared/config.js';
import {
  ConflictError,
  ForbiddenError,
  IllegalTransitionError,
  NotFoundError,
  ValidationError,
} from '../../../shared/domain/errors.js';

describe('errorResponse', () => {
  it.each([
    [new ValidationError('bad', [{ path: 'inputs.x', message: 'must be a number' }]), 400, 'VALIDATION_FAILED'],
    [new ForbiddenError('no'), 403, 'FORBIDDEN'],
    [new NotFoundError('gone'), 404, 'NOT_FOUND'],
    [new ConflictError('again'), 409, 'CONFLICT'],
    [new IllegalTransitionError('run', 'succeeded', 'running'), 409, 'ILLEGAL_TRANSITION'],
  ])('maps %s to its status and stable code', (error, status, code) => {
    const response = errorResponse(error);
    expect(response.statusCode).toBe(status);
    expect(JSON.parse(response.body)).toMatchObject({ error: { code, message: error.message } });
  });

  it('names the field of a zod failure', () => {
    const result = z.object({ limit: z.number() }).safeParse({ limit: 'x' });
    const response = errorResponse(result.error);
    expect(response.statusCode).toBe(400);
    expect(JSON.parse(response.body)).toMatchObject({ error: { details: [{ path: 'limit' }] } });
  });

  it('answers an unexpected error with a generic 500 that leaks nothing', () => {
    const response = errorResponse(new Error('connection string postgres://admin:hunter2@db'));
    expect(response.statusCode).toBe(500);
    expect(response.body).not.toMatch(/hunter2|postgres/);
  });

  it('names the request id in a 500 body, and nothing else about the failure', () => {
    const response = errorResponse(new Error('secret detail'), 'req-123');
    expect(JSON.parse(response.body)).toEqual({
      error: { code: 'INTERNAL', message: expect.stringContaining('req-123'), details: { requestId: 'req-123' } },
    });
    expect(response.body).not.toMatch(/secret detail/);
  });
});

describe('parseConfig', () => {
  it('names the missing variable', () => {
    expect(() => parseConfig({ CAPSTAN_EVENTS_TABLE: 'e', CAPSTAN_CONNECTIONS_TABLE: 'c' })).toThrow(
      /CAPSTAN_STATE_TABLE/,
    );
  });

  const tables = { CAPSTAN_STATE_TABLE: 's', CAPSTAN_EVENTS_TABLE: 'e', CAPSTAN_CONNECTIONS_TABLE: 'c' };

  it.each(['0', 'three', '-1', '9'])('fails loudly on CAPSTAN_RECONCILE_SWEEPS=%s, naming it', (value) => {
    expect(() => parseConfig({ ...tables, CAPSTAN_RECONCILE_SWEEPS: value })).toThrow(/CAPSTAN_RECONCILE_SWEEPS/);
  });

  it('reads the reconciler sweeps and the token lifetime, with their defaults', () => {
    expect(parseConfig({ ...tables, CAPSTAN_RECONCILE_SWEEPS: '1' }).CAPSTAN_RECONCILE_SWEEPS).toBe(1);
    expect(parseConfig(tables)).toMatchObject({
      CAPSTAN_RECONCILE_SWEEPS: 3,
      CAPSTAN_JWT_MAX_LIFETIME_SECONDS: 86_400,
    });
    expect(() => parseConfig({ ...tables, CAPSTAN_JWT_MAX_LIFETIME_SECONDS: 'forever' })).toThrow(
      /CAPSTAN_JWT_MAX_LIFETIME_SECONDS/,
    );
  });

  it('fills defaults', () => {
    const config = parseConfig({ CAPSTAN_STATE_TABLE: 's', CAPSTAN_EVENTS_TABLE: 'e', CAPSTAN_CONNECTIONS_TABLE: 'c' });
    expect(config).toMatchObject({ CAPSTAN_PREFIX: 'capstan', CAPSTAN_JWT_AUDIENCE: 'capstan' });
  });
});
