import { useEffect, useMemo, useState } from 'preact/hooks';
import { describeError, type RunStatus, type RunSummary } from '../api.js';
import { useSession } from '../context.js';
import { age, RUN_STATUSES, statusAfter, statusWords, TERMINAL } from '../format.js';

/** How often the list is read again for runs started elsewhere; status changes come live. */
const REFRESH_MS = 15_000;
/** The ticket filter asks the server once typing pauses, not per key. */
const TYPING_MS = 300;

export function StatusBadge({ status }: { status: string }) {
  return <span class={`badge status-${status}`}>{statusWords(status)}</span>;
}

/** Runs: the tenant's runs with status, runbook, ticket, requester and age; filters; live status. */
export function RunsScreen() {
  const { api, stream } = useSession();
  const [status, setStatus] = useState<RunStatus | ''>('');
  const [ticket, setTicket] = useState('');
  const [ticketQuery, setTicketQuery] = useState('');
  const [runs, setRuns] = useState<RunSummary[]>();
  const [error, setError] = useState<string>();
  const [tick, setTick] = useState(0);

  useEffect(() => {
    const timer = setTimeout(() => setTicketQuery(ticket.trim()), TYPING_MS);
    return () => clearTimeout(timer);
  }, [ticket]);

  useEffect(() => {
    let stale = false;
    // A ticket's runs come from the server's ticket index, so a ticket older than the newest page is still found.
    const load = () =>
      api.listRuns(status || undefined, ticketQuery || undefined).then(
        (page) => !stale && (setRuns(page.runs), setError(undefined)),
        (failure: unknown) => !stale && setError(describeError(failure)),
      );
    void load();
    const timer = setInterval(() => {
      void load();
      setTick((n) => n + 1);
    }, REFRESH_MS);
    return () => {
      stale = true;
      clearInterval(timer);
    };
  }, [api, status, ticketQuery]);

  // Live: every run still moving is followed over the one socket; its events move its row.
  const active = useMemo(() => (runs ?? []).filter((r) => !TERMINAL.includes(r.status)).map((r) => r.runId), [runs]);
  useEffect(() => {
    const stops = active.map((runId) =>
      stream.subscribe(runId, (events) => {
        const last = events
          .map(statusAfter)
          .filter((s) => s !== undefined)
          .at(-1);
        if (!last) return;
        setRuns((current) => current?.map((r) => (r.runId === runId ? { ...r, status: last } : r)));
      }),
    );
    return () => stops.forEach((stop) => stop());
  }, [stream, active.join(',')]);

  const shown = runs ?? [];
  return (
    <section aria-labelledby="runs-title">
      <h1 id="runs-title">Runs</h1>
      <form class="filters" onSubmit={(e) => e.preventDefault()}>
        <label>
          Status
          <select value={status} onChange={(e) => setStatus(e.currentTarget.value as RunStatus | '')}>
            <option value="">any</option>
            {RUN_STATUSES.map((s) => (
              <option value={s} key={s}>
                {statusWords(s)}
              </option>
            ))}
          </select>
        </label>
        <label>
          Ticket id
          <input
            type="search"
            value={ticket}
            placeholder="e.g. INC-42"
            onInput={(e) => setTicket(e.currentTarget.value)}
          />
        </label>
      </form>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      {runs === undefined ? (
        <p aria-busy="true">Loading runs…</p>
      ) : shown.length === 0 ? (
        <p>{ticketQuery ? `No run has ticket ${ticketQuery}.` : 'No runs match.'}</p>
      ) : (
        <div class="table-wrap">
          <table class="runs" data-tick={tick}>
            <caption class="visually-hidden">Runs, newest first</caption>
            <thead>
              <tr>
                <th scope="col">Run</th>
                <th scope="col">Status</th>
                <th scope="col">Runbook</th>
                <th scope="col">Ticket</th>
                <th scope="col">Requester</th>
                <th scope="col">Age</th>
              </tr>
            </thead>
            <tbody>
              {shown.map((run) => (
                <tr key={run.runId} data-run={run.runId}>
                  <td data-label="Run">
                    <a href={`#/runs/${run.runId}`}>{run.runId.slice(4, 12)}</a>
                  </td>
                  <td data-label="Status">
                    <StatusBadge status={run.status} />
                  </td>
                  <td data-label="Runbook">
                    {run.runbookId} v{run.runbookVersion}
                  </td>
                  <td data-label="Ticket">{run.ticket ? `${run.ticket.id} (${run.ticket.source})` : '—'}</td>
                  <td data-label="Requester">{run.requestedBy}</td>
                  <td data-label="Age">
                    <time dateTime={run.createdAt} title={run.createdAt}>
                      {age(run.createdAt)}
                    </time>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
