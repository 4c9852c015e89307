import { useEffect, useState } from 'preact/hooks';
import { describeError, type RunDetail } from '../api.js';
import { useSession } from '../context.js';
import { age } from '../format.js';
import { ApprovalPanel } from './approval-panel.js';

/** Approvals: every run of the tenant that waits on a gate, each decided here or in its workspace. */
export function ApprovalsScreen() {
  const { api, stream, identity } = useSession();
  const [runs, setRuns] = useState<RunDetail[]>();
  const [error, setError] = useState<string>();
  const [version, setVersion] = useState(0);

  useEffect(() => {
    let stale = false;
    api
      .listRuns('waiting_for_approval')
      .then((page) => Promise.all(page.runs.map((r) => api.run(r.runId))))
      .then(
        (details) => !stale && (setRuns(details), setError(undefined)),
        (failure: unknown) => !stale && setError(describeError(failure)),
      );
    return () => {
      stale = true;
    };
  }, [api, version]);

  // A gate decided anywhere (here, in a workspace, by the CLI) reads the inbox again.
  useEffect(() => {
    const stops = (runs ?? []).map((run) =>
      stream.subscribe(
        run.runId,
        (events) => events.some((e) => e.type.startsWith('approval.')) && setVersion((v) => v + 1),
        run.lastEventSeq,
      ),
    );
    return () => stops.forEach((stop) => stop());
  }, [stream, runs]);

  const mine = (runs ?? []).filter((run) => run.status === 'waiting_for_approval');
  return (
    <section aria-labelledby="approvals-title">
      <h1 id="approvals-title">Approvals</h1>
      <p class="muted">Gates waiting for a decision, signed in as {identity.sub}.</p>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      {runs === undefined ? (
        <p aria-busy="true">Loading approvals…</p>
      ) : mine.length === 0 ? (
        <p>Nothing waits for approval.</p>
      ) : (
        <ul class="inbox">
          {mine.map((run) => (
            <li key={run.runId} class="card" data-run={run.runId}>
              <h2>
                <a href={`#/runs/${run.runId}`}>
                  {run.runbookId} v{run.runbookVersion}
                </a>{' '}
                <span class="muted">
                  requested by {run.requestedBy} {age(run.createdAt)} ago{run.ticket && ` · ticket ${run.ticket.id}`}
                </span>
              </h2>
              <ApprovalPanel run={run} onDecided={() => setVersion((v) => v + 1)} />
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
