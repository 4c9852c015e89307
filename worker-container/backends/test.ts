import type { Counters } from '../../shared/adapters/dynamodb/counters.js';
import { ActionError, type Backend, sleep } from './types.js';

/**
 * The built-in `test` backend (brief: "Built-in backend test"): echo, sleep, fail, flaky,
 * counter, and artifact (stores its content as a named artifact of the run). Params arrive already checked against the catalogue.
 */
export function makeTestBackend(
  counters: Counters,
  /** Called after `counter` added one, before the result is recorded (the chaos suite's crash point). */
  afterCount?: (key: string) => void,
): Backend {
  return {
    name: 'test',
    actions: {
      async echo({ params, output }) {
        const message = String(params.message);
        output('stdout', message);
        return { output: { message } };
      },
      async sleep({ params, signal, output }) {
        const ms = Number(params.ms);
        output('stdout', `sleeping ${ms} ms`);
        await sleep(ms, signal);
        return { output: { sleptMs: ms } };
      },
      async fail({ params, output }) {
        if (params.when === 'false') {
          output('stdout', 'not failing here');
          return { output: { failed: false } };
        }
        throw new ActionError('TEST_FAILURE', String(params.message), params.retryable !== false);
      },
      async flaky({ params, attempt, output }) {
        const failTimes = Number(params.fail_times);
        if (attempt <= failTimes) {
          output('stderr', `attempt ${attempt} of the first ${failTimes} fails`);
          throw new ActionError('FLAKY', `attempt ${attempt} failed on purpose`, true);
        }
        output('stdout', `attempt ${attempt} succeeds`);
        return { output: { attempt } };
      },
      async artifact({ params, output, artifact }) {
        if (!artifact) throw new ActionError('ARTIFACTS_UNAVAILABLE', 'this worker has no evidence bucket', false);
        const stored = await artifact(String(params.name), Buffer.from(String(params.content), 'utf8'));
        output('stdout', `stored ${stored.name} (${stored.size} bytes, sha256 ${stored.sha256})`);
        return { output: { artifact: stored } };
      },
      async counter({ params, output }) {
        const value = await counters.increment(String(params.key));
        afterCount?.(String(params.key));
        output('stdout', `${String(params.key)} = ${value}`);
        return { output: { key: String(params.key), value } };
      },
    },
  };
}
