import { describe, expect, it } from 'vitest';
import { makeRunEndings } from '../../../shared/app/run-endings.js';

const created = (runId: string) => ({ runId, type: 'run.created' as const, payload: { runbookId: 'hello' } });

describe('run endings from the stream', () => {
  it('says how a run ended once its creation was seen, with the failure code', () => {
    const endings = makeRunEndings();
    endings.observe(created('r-1'));
    endings.observe(created('r-2'));
    expect(
      endings.endingOf({ runId: 'r-1', type: 'run.failed', payload: { error: { code: 'STEP_FAILED', message: 'x' } } }),
    ).toEqual({ status: 'failed', runbookId: 'hello', error: { code: 'STEP_FAILED' } });
    expect(endings.endingOf({ runId: 'r-2', type: 'run.succeeded', payload: {} })).toEqual({
      status: 'succeeded',
      runbookId: 'hello',
    });
  });

  it('knows nothing of a run whose creation it did not see, nor of an event that is not an end', () => {
    const endings = makeRunEndings();
    expect(endings.endingOf({ runId: 'r-9', type: 'run.cancelled', payload: {} })).toBeUndefined();
    endings.observe(created('r-1'));
    expect(endings.endingOf({ runId: 'r-1', type: 'step.started', payload: {} })).toBeUndefined();
  });
});
