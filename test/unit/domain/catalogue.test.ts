import { describe, expect, it } from 'vitest';
import { CATALOGUE, checkAction, findAction } from '../../../shared/domain/catalogue.js';
import { parseDuration } from '../../../shared/domain/duration.js';
import { profileAllows, SANDBOX_PROFILES } from '../../../shared/domain/sandbox-profiles.js';
import { substitute } from '../../../shared/domain/template.js';

describe('the backend catalogue', () => {
  it('declares traits for every action', () => {
    for (const backend of Object.values(CATALOGUE)) {
      for (const spec of Object.values(backend.actions)) {
        expect(typeof spec.safeToRetry).toBe('boolean');
        expect(typeof spec.destructive).toBe('boolean');
        expect(typeof spec.reversible).toBe('boolean');
      }
    }
  });

  it('fills parameter defaults', () => {
    expect(checkAction('script', 'run', { script: 'service-restart' }, [])).toEqual({
      ok: true,
      params: { script: 'service-restart', args: [] },
    });
  });

  it('does not find inherited properties as actions', () => {
    expect(findAction('test', 'toString')).toBeUndefined();
    expect(findAction('test', 'constructor')).toBeUndefined();
  });

  it('refuses a script name that is a path', () => {
    const result = checkAction('script', 'run', { script: '../../bin/sh' }, ['x']);
    expect(result.ok).toBe(false);
  });

  it('marks the counter as unsafe to retry, so recovery needs its receipt', () => {
    expect(findAction('test', 'counter')?.safeToRetry).toBe(false);
  });
});

describe('sandbox profiles', () => {
  it('allow only listed actions in prod-critical', () => {
    const profile = SANDBOX_PROFILES['prod-critical'];
    expect(profileAllows(profile, 'http', 'get')).toBe(true);
    expect(profileAllows(profile, 'script', 'run')).toBe(false);
    expect(profileAllows(profile, 'test', 'counter')).toBe(true);
  });

  it('allow everything but the deny-list in dev-flex', () => {
    const profile = SANDBOX_PROFILES['dev-flex'];
    expect(profileAllows(profile, 'script', 'run')).toBe(true);
    expect(profileAllows(profile, 'aws', 'secretsmanager.rotateSecret')).toBe(false);
  });

  it('harden prod containers with a read-only root filesystem', () => {
    expect(SANDBOX_PROFILES['prod-critical'].container.readOnlyRootFilesystem).toBe(true);
    expect(SANDBOX_PROFILES['prod-critical'].container.egress).toBe('none');
  });
});

describe('durations', () => {
  it.each([
    ['500ms', 500],
    ['30s', 30_000],
    ['5m', 300_000],
    ['2h', 7_200_000],
  ])('reads %s', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each(['', '5', '1.5s', '-3s', '5 m', '3d'])('refuses %j', (text) => {
    expect(parseDuration(text)).toBeUndefined();
  });
});

describe('substitute', () => {
  const inputs = { service: 'nginx', count: 3, flags: ['-a', '-b'] };

  it('keeps the type of a whole-string placeholder', () => {
    expect(substitute({ n: '{{ inputs.count }}', f: '{{inputs.flags}}' }, inputs)).toEqual({
      n: 3,
      f: ['-a', '-b'],
    });
  });

  it('places values inside text as text', () => {
    expect(substitute({ args: ['restart {{ inputs.service }} x{{ inputs.count }}'] }, inputs)).toEqual({
      args: ['restart nginx x3'],
    });
  });

  it('inserts shell metacharacters as plain data', () => {
    const result = substitute({ args: ['{{ inputs.service }}'] }, { service: '; rm -rf / #' });
    expect(result).toEqual({ args: ['; rm -rf / #'] });
  });

  it('does not substitute a second time inside a value', () => {
    expect(substitute({ m: '{{ inputs.a }}' }, { a: '{{ inputs.b }}', b: 'leak' })).toEqual({
      m: '{{ inputs.b }}',
    });
  });

  it('refuses a list inside text and a missing input', () => {
    expect(() => substitute('x {{ inputs.flags }}', inputs)).toThrow(/cannot be placed inside text/);
    expect(() => substitute('{{ inputs.missing }}', inputs)).toThrow(/no value/);
  });
});
