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
});

describe('parseConfig', () => {
  it('names the missing variable', () => {
    expect(() => parseConfig({ CAPSTAN_EVENTS_TABLE: 'e', CAPSTAN_CONNECTIONS_TABLE: 'c' })).toThrow(
      /CAPSTAN_STATE_TABLE/,
    );
  });

  it('fills defaults', () => {
    const config = parseConfig({ CAPSTAN_STATE_TABLE: 's', CAPSTAN_EVENTS_TABLE: 'e', CAPSTAN_CONNECTIONS_TABLE: 'c' });
    expect(config).toMatchObject({ CAPSTAN_PREFIX: 'capstan', CAPSTAN_JWT_AUDIENCE: 'capstan' });
  });
});
