import { describe, expect, it } from 'vitest';
import { parseWorkerConfig } from '../../../shared/config.js';

const BASE = {
  CAPSTAN_STATE_TABLE: 'capstan-state',
  CAPSTAN_EVENTS_TABLE: 'capstan-events',
  CAPSTAN_CONNECTIONS_TABLE: 'capstan-connections',
  CAPSTAN_SANDBOX_PROFILE: 'dev-flex',
};

describe("the worker's configuration", () => {
  it('parses the shared settings and the worker section from one environment, with defaults', () => {
    const config = parseWorkerConfig({ ...BASE, CAPSTAN_WORKER_HEARTBEAT_SECONDS: '5' });
    expect(config).toMatchObject({
      CAPSTAN_STATE_TABLE: 'capstan-state',
      CAPSTAN_WORKER_HEARTBEAT_SECONDS: 5,
      CAPSTAN_SANDBOX_PROFILE: 'dev-flex',
      CAPSTAN_WORKER_GROUPS: '',
      CAPSTAN_VERSION: 'dev',
    });
    expect(config.ECS_CONTAINER_METADATA_URI_V4).toBeUndefined();
  });

  it('fails with the name of a missing worker variable', () => {
    const { CAPSTAN_SANDBOX_PROFILE: _, ...missing } = BASE;
    expect(() => parseWorkerConfig(missing)).toThrow(/CAPSTAN_SANDBOX_PROFILE/);
  });

  it('fails with the name of a bad variable, worker or shared', () => {
    expect(() => parseWorkerConfig({ ...BASE, CAPSTAN_SANDBOX_PROFILE: 'prod-anything' })).toThrow(
      /CAPSTAN_SANDBOX_PROFILE/,
    );
    expect(() => parseWorkerConfig({ ...BASE, ECS_CONTAINER_METADATA_URI_V4: 'not a url' })).toThrow(
      /ECS_CONTAINER_METADATA_URI_V4/,
    );
    const { CAPSTAN_STATE_TABLE: _, ...noTable } = BASE;
    expect(() => parseWorkerConfig(noTable)).toThrow(/CAPSTAN_STATE_TABLE/);
  });

  it('reads an agent node id and tenant, and refuses a node id no queue or inventory could name', () => {
    expect(parseWorkerConfig({ ...BASE, CAPSTAN_NODE_ID: 'web-1', CAPSTAN_NODE_TENANT: 'acme' })).toMatchObject({
      CAPSTAN_NODE_ID: 'web-1',
      CAPSTAN_NODE_TENANT: 'acme',
    });
    expect(() => parseWorkerConfig({ ...BASE, CAPSTAN_NODE_ID: 'web 1; rm -rf' })).toThrow(/CAPSTAN_NODE_ID/);
  });
});
