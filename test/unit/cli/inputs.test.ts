import { describe, expect, it } from 'vitest';
import { UsageError } from '../../../cli/errors.js';
import { buildInputs, coerceInput, parseInputFile, splitAssignment } from '../../../cli/inputs.js';

describe('run inputs', () => {
  it('splits key=value at the first equals sign', () => {
    expect(splitAssignment('query=a=b')).toEqual(['query', 'a=b']);
    expect(() => splitAssignment('=x')).toThrow(UsageError);
    expect(() => splitAssignment('novalue')).toThrow(/is not key=value/);
  });

  it('types each value as the runbook declares its input', () => {
    expect(coerceInput('n', '3', { type: 'number' })).toBe(3);
    expect(coerceInput('s', '3', { type: 'string' })).toBe('3');
    expect(coerceInput('b', 'false', { type: 'boolean' })).toBe(false);
    expect(coerceInput('l', '["a", 1]', { type: 'list' })).toEqual(['a', 1]);
    expect(coerceInput('o', '{"k": true}', { type: 'object' })).toEqual({ k: true });
    expect(coerceInput('undeclared', '42', undefined)).toBe('42');
  });

  it('refuses a value its declared type cannot take, naming the input', () => {
    expect(() => coerceInput('n', 'three', { type: 'number' })).toThrow(/--input n=three: not a number/);
    expect(() => coerceInput('b', 'yes', { type: 'boolean' })).toThrow(UsageError);
    expect(() => coerceInput('l', '{"k": 1}', { type: 'list' })).toThrow(/not a JSON array/);
    expect(() => coerceInput('o', '[1]', { type: 'object' })).toThrow(/not a JSON object/);
  });

  it('lets --input win over the input file', () => {
    const fromFile = parseInputFile('inputs.yaml', 'who: file\nreplicas: 2\n');
    expect(buildInputs(['who=flag'], fromFile, { who: { type: 'string' } })).toEqual({ who: 'flag', replicas: 2 });
  });

  it('refuses an input file that is not an object', () => {
    expect(() => parseInputFile('inputs.json', '[1, 2]')).toThrow(/must hold an object/);
  });
});
