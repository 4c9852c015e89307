import { describe, expect, it } from 'vitest';
import { backlogPerWorker, desiredPoolSize, nextPoolSize } from '../../../shared/domain/capacity.js';
import { capacityOf, parseConfig } from '../../../shared/config.js';

const bounds = { minWorkers: 1, maxWorkers: 4, backlogPerWorker: 10 };

describe('worker pool scaling', () => {
  it('grows at once to one worker per target backlog, up to the maximum', () => {
    expect(nextPoolSize(bounds, 1, 200)).toBe(4);
    expect(nextPoolSize(bounds, 1, 25)).toBe(3);
    expect(nextPoolSize(bounds, 4, 200)).toBe(4);
  });

  it('counts messages in flight as backlog, so busy workers are not scaled away', () => {
    expect(desiredPoolSize(bounds, 40)).toBe(4);
    expect(nextPoolSize(bounds, 4, 31)).toBe(4);
  });

  it('shrinks one worker at a time as the backlog falls, never below the minimum', () => {
    expect(nextPoolSize(bounds, 4, 0)).toBe(3);
    expect(nextPoolSize(bounds, 3, 12)).toBe(2);
    expect(nextPoolSize(bounds, 1, 0)).toBe(1);
  });

  it('starts a worker for any backlog when a pool with no minimum has none', () => {
    expect(nextPoolSize({ ...bounds, minWorkers: 0 }, 0, 1)).toBe(1);
    expect(nextPoolSize({ ...bounds, minWorkers: 0 }, 0, 0)).toBe(0);
  });

  it('computes backlog per worker as the stack’s metric does, the whole backlog with no worker', () => {
    expect(backlogPerWorker(30, 3)).toBe(10);
    expect(backlogPerWorker(7, 0)).toBe(7);
  });
});

describe('capacity configuration', () => {
  const env = { CAPSTAN_STATE_TABLE: 's', CAPSTAN_EVENTS_TABLE: 'e', CAPSTAN_CONNECTIONS_TABLE: 'c' };

  it('fills every default, the minimum from the profile’s desired count', () => {
    expect(capacityOf(undefined, 'prod-critical')).toEqual({
      maxBacklog: 500,
      minWorkers: 2,
      maxWorkers: 4,
      backlogPerWorker: 10,
      stepsPerWorker: 1,
    });
  });

  it('runs one step per worker unless CAPSTAN_CAPACITY gives the profile more', () => {
    expect(capacityOf(undefined, 'dev-flex').stepsPerWorker).toBe(1);
    const parsed = parseConfig({ ...env, CAPSTAN_CAPACITY: '{"dev-flex": {"stepsPerWorker": 4}}' });
    expect(capacityOf(parsed.CAPSTAN_CAPACITY, 'dev-flex').stepsPerWorker).toBe(4);
    expect(capacityOf(parsed.CAPSTAN_CAPACITY, 'prod-critical').stepsPerWorker).toBe(1);
    expect(() => parseConfig({ ...env, CAPSTAN_CAPACITY: '{"dev-flex": {"stepsPerWorker": 0}}' })).toThrow(
      /CAPSTAN_CAPACITY/,
    );
  });

  it('parses CAPSTAN_CAPACITY as JSON per profile', () => {
    const parsed = parseConfig({ ...env, CAPSTAN_CAPACITY: '{"dev-flex": {"maxBacklog": 20, "maxWorkers": 3}}' });
    expect(capacityOf(parsed.CAPSTAN_CAPACITY, 'dev-flex')).toMatchObject({ maxBacklog: 20, maxWorkers: 3 });
  });

  it('names the variable when CAPSTAN_CAPACITY is not JSON, names an unknown profile, or has min over max', () => {
    expect(() => parseConfig({ ...env, CAPSTAN_CAPACITY: '{' })).toThrow(/CAPSTAN_CAPACITY: is not JSON/);
    expect(() => parseConfig({ ...env, CAPSTAN_CAPACITY: '{"nope": {}}' })).toThrow(/CAPSTAN_CAPACITY/);
    expect(() => parseConfig({ ...env, CAPSTAN_CAPACITY: '{"dev-flex": {"minWorkers": 5, "maxWorkers": 2}}' })).toThrow(
      /minWorkers must not exceed maxWorkers/,
    );
  });
});
