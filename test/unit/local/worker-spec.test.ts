import { describe, expect, it } from 'vitest';
import { parseAgentWorkers, parseWorkerCounts } from '../../../local/workers.js';

describe('CAPSTAN_WORKERS', () => {
  it('reads agent node workers beside the profile counts', () => {
    const text = 'dev-flex=2,agent:web-1:web,agent:web-2:web+eu@staging-standard,agent:solo';
    expect(parseWorkerCounts(text, 1)['dev-flex']).toBe(2);
    expect(parseAgentWorkers(text)).toEqual([
      { nodeId: 'web-1', groups: ['web'], profile: 'dev-flex' },
      { nodeId: 'web-2', groups: ['web', 'eu'], profile: 'staging-standard' },
      { nodeId: 'solo', groups: [], profile: 'dev-flex' },
    ]);
  });

  it('refuses an agent entry it cannot read, naming the syntax', () => {
    expect(() => parseAgentWorkers('agent:web-1:web@nowhere')).toThrow(/agent:<node>\[:<group>/);
    expect(() => parseAgentWorkers('agent:web-1,agent:web-1')).toThrow(/named twice/);
  });
});
