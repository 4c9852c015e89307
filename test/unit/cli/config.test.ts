import { describe, expect, it } from 'vitest';
import { normaliseUrl, resolveConfig } from '../../../cli/config.js';
import { ConfigNotFoundError, UsageError } from '../../../cli/errors.js';

const LOCAL = JSON.stringify({
  restUrl: 'http://127.0.0.1:4000/v1',
  wsUrl: 'ws://127.0.0.1:4000/ws',
  tokens: { operator: 'op-token', approver: 'ap-token' },
});
/** A file system holding `.capstan/local.json` under /repo. */
const fs = (files: Record<string, string> = { '/repo/.capstan/local.json': LOCAL }) => ({
  exists: (path: string) => path in files,
  read: (path: string) => files[path] ?? '',
});

describe('resolveConfig', () => {
  it('takes --url and --token before the environment and the local file', () => {
    const config = resolveConfig(
      { url: 'https://api.example.com/prod', token: 'flag' },
      { CAPSTAN_URL: 'http://env', CAPSTAN_TOKEN: 'env' },
      '/repo',
      fs(),
    );
    expect(config).toMatchObject({ url: 'https://api.example.com/prod/v1', token: 'flag', source: '--url' });
  });

  it('takes CAPSTAN_URL and CAPSTAN_TOKEN before the local file', () => {
    const config = resolveConfig({}, { CAPSTAN_URL: 'http://env/v1/', CAPSTAN_TOKEN: 'env' }, '/repo', fs());
    expect(config).toMatchObject({ url: 'http://env/v1', token: 'env', source: 'CAPSTAN_URL' });
    expect(config.wsUrl).toBeUndefined();
  });

  it('finds .capstan/local.json from a subdirectory upward, as the operator by default', () => {
    const config = resolveConfig({}, {}, '/repo/examples/runbooks', fs());
    expect(config).toEqual({
      url: 'http://127.0.0.1:4000/v1',
      token: 'op-token',
      wsUrl: 'ws://127.0.0.1:4000/ws',
      source: '/repo/.capstan/local.json (as operator)',
    });
  });

  it('uses the token of --as from the local file', () => {
    expect(resolveConfig({ as: 'approver' }, {}, '/repo', fs()).token).toBe('ap-token');
  });

  it('names the roles the local file has when --as names another', () => {
    expect(() => resolveConfig({ as: 'auditor' }, {}, '/repo', fs())).toThrow(UsageError);
    try {
      resolveConfig({ as: 'auditor' }, {}, '/repo', fs());
    } catch (error) {
      expect((error as UsageError).hint).toContain('operator, approver');
    }
  });

  it('says how to configure the CLI when nothing is found', () => {
    expect(() => resolveConfig({}, {}, '/elsewhere', fs())).toThrow(ConfigNotFoundError);
    try {
      resolveConfig({}, {}, '/elsewhere', fs());
    } catch (error) {
      expect((error as ConfigNotFoundError).hint).toMatch(/--url and --token.*CAPSTAN_URL.*npm start/);
    }
  });

  it('takes the token from the environment and the address from the local file', () => {
    expect(resolveConfig({}, { CAPSTAN_TOKEN: 'env' }, '/repo', fs())).toMatchObject({
      url: 'http://127.0.0.1:4000/v1',
      token: 'env',
    });
  });

  it('reports a local file that is not one', () => {
    expect(() => resolveConfig({}, {}, '/repo', fs({ '/repo/.capstan/local.json': '{"nope": 1}' }))).toThrow(
      /is not a Capstan local file/,
    );
  });
});

describe('normaliseUrl', () => {
  it('ends the address in /v1 exactly once', () => {
    expect(normaliseUrl('http://h/prod')).toBe('http://h/prod/v1');
    expect(normaliseUrl('http://h/prod/v1/')).toBe('http://h/prod/v1');
  });
});
