import { useEffect, useState } from 'preact/hooks';
import { ApiError, describeError, type WorkerView } from '../api.js';
import { CAN_OPERATE, hasRole } from '../auth/session.js';
import { useSession } from '../context.js';
import { statusWords } from '../format.js';
import { ActionButton } from './confirm.js';

/** One read of the whole list this often: heartbeat ages move without a request per row. */
const REFRESH_MS = 5_000;

/** Workers: status, heartbeat age, current step; drain with confirmation. Only the platform tenant sees them. */
export function WorkersScreen() {
  const { api, identity } = useSession();
  const [workers, setWorkers] = useState<WorkerView[]>();
  const [error, setError] = useState<{ text: string; forbidden: boolean }>();
  const [version, setVersion] = useState(0);

  useEffect(() => {
    let stale = false;
    const load = () =>
      api.workers().then(
        (page) => !stale && (setWorkers(page.workers), setError(undefined)),
        (failure: unknown) =>
          !stale &&
          setError({ text: describeError(failure), forbidden: failure instanceof ApiError && failure.status === 403 }),
      );
    void load();
    const timer = setInterval(load, REFRESH_MS);
    return () => {
      stale = true;
      clearInterval(timer);
    };
  }, [api, version]);

  const operate = hasRole(identity, CAN_OPERATE);
  return (
    <section aria-labelledby="workers-title">
      <h1 id="workers-title">Workers</h1>
      {error?.forbidden ? (
        <div class="note" data-testid="workers-forbidden">
          <p>
            Workers belong to the team that runs this deployment: only its tenant sees them. You are signed in to tenant{' '}
            <strong>{identity.tenant}</strong>.
          </p>
          <p class="muted">The API said: {error.text}</p>
        </div>
      ) : error ? (
        <p role="alert" class="error">
          {error.text}
        </p>
      ) : workers === undefined ? (
        <p aria-busy="true">Loading workers…</p>
      ) : workers.length === 0 ? (
        <p>No worker has registered.</p>
      ) : (
        <div class="table-wrap">
          <table>
            <caption class="visually-hidden">Registered workers</caption>
            <thead>
              <tr>
                <th scope="col">Worker</th>
                <th scope="col">Status</th>
                <th scope="col">Profile</th>
                <th scope="col">Heartbeat</th>
                <th scope="col">Current step</th>
                <th scope="col">Done</th>
                {operate && (
                  <th scope="col">
                    <span class="visually-hidden">Actions</span>
                  </th>
                )}
              </tr>
            </thead>
            <tbody>
              {workers.map((w) => (
                <tr key={w.workerId} data-worker={w.workerId}>
                  <td data-label="Worker">
                    {w.workerId}
                    <div class="muted">
                      {w.hostname} pid {w.pid}
                    </div>
                  </td>
                  <td data-label="Status">
                    <span class={`badge worker-${w.status}`}>{statusWords(w.status)}</span>
                    {w.drainRequested && w.status !== 'draining' && <span class="muted"> drain asked</span>}
                  </td>
                  <td data-label="Profile">
                    {w.sandboxProfile} ({w.environment})
                  </td>
                  <td data-label="Heartbeat">
                    {Math.round(w.secondsSinceHeartbeat)} s ago
                    {w.missedBeats > 0 && <span class="error"> · {w.missedBeats} missed</span>}
                  </td>
                  <td data-label="Current step">{w.currentExecutionId ?? '—'}</td>
                  <td data-label="Done">{w.stats.tasksCompleted}</td>
                  {operate && (
                    <td>
                      {!w.drainRequested && ['idle', 'busy'].includes(w.status) && (
                        <ActionButton
                          label={`Drain ${w.workerId}`}
                          danger
                          question={`Drain ${w.workerId}? It finishes its current step, takes no new work, and stops.`}
                          confirmLabel="Yes, drain it"
                          run={() => api.drain(w.workerId)}
                          onDone={() => setVersion((v) => v + 1)}
                        />
                      )}
                    </td>
                  )}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
