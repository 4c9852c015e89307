import { useEffect, useState } from 'preact/hooks';
import type { StepView, TargetView } from '../api.js';
import { duration, statusWords } from '../format.js';

/** How many targets a list shows at once: a 1,000-node step is read a page at a time, not drawn whole. */
const PAGE = 50;

/** The order the count chips come in: what moves first, then how things ended. */
const ORDER = ['waiting', 'pending', 'leased', 'running', 'succeeded', 'failed', 'timed_out', 'cancelled', 'skipped'];

/** A step with targets of its own, rather than the one `-` execution of a step that runs once. */
export const hasTargets = (step: StepView): boolean =>
  step.expected !== undefined || step.targets.some((t) => t.targetId !== '-');

/** Targets per status: the server's counts, or counted here for a detail that has none. */
export function countsOf(step: StepView): Array<[string, number]> {
  const counts: Record<string, number> = { ...step.counts };
  if (!step.counts) for (const t of step.targets) counts[t.status] = (counts[t.status] ?? 0) + 1;
  const rank = (s: string) => (ORDER.includes(s) ? ORDER.indexOf(s) : ORDER.length);
  return Object.entries(counts)
    .filter(([, n]) => n > 0)
    .sort(([a], [b]) => rank(a) - rank(b));
}

/** "5 targets: 3 succeeded, 2 running", as chips; with `onPick`, each chip filters a list. */
export function CountChips(props: { step: StepView; picked?: string; onPick?: (status: string | undefined) => void }) {
  const { step, picked, onPick } = props;
  const counts = countsOf(step);
  const expected = step.expected?.length ?? step.targets.length;
  return (
    <div class="fanout" data-testid={`counts-${step.id}`}>
      <span class="muted">
        {expected} {expected === 1 ? 'target' : 'targets'}
      </span>
      <ul class="chips" aria-label={`Targets of ${step.id} by status`}>
        {counts.map(([status, n]) => (
          <li key={status} data-status={status}>
            {onPick ? (
              <button
                type="button"
                class={`badge status-${status}`}
                aria-pressed={picked === status}
                onClick={() => onPick(picked === status ? undefined : status)}
              >
                {n} {statusWords(status)}
              </button>
            ) : (
              <span class={`badge status-${status}`}>
                {n} {statusWords(status)}
              </span>
            )}
          </li>
        ))}
      </ul>
    </div>
  );
}

/** The selected step's targets, a page at a time, filtered by status; picking one shows its output and events. */
export function TargetList(props: {
  step: StepView;
  selected: string | undefined;
  onSelect: (targetId: string | undefined) => void;
}) {
  const { step, selected, onSelect } = props;
  const [status, setStatus] = useState<string>();
  const [shown, setShown] = useState(PAGE);
  useEffect(() => {
    setStatus(undefined);
    setShown(PAGE);
  }, [step.id]);
  const matching: TargetView[] = status ? step.targets.filter((t) => t.status === status) : step.targets;
  const page = matching.slice(0, shown);
  return (
    <div class="target-list">
      <CountChips
        step={step}
        picked={status}
        onPick={(s) => {
          setStatus(s);
          setShown(PAGE);
        }}
      />
      <table class="targets" data-testid="targets">
        <caption class="visually-hidden">Targets of {step.id}</caption>
        <thead>
          <tr>
            <th scope="col">Target</th>
            <th scope="col">Status</th>
            <th scope="col">Attempt</th>
            <th scope="col">Time</th>
          </tr>
        </thead>
        <tbody>
          {page.map((target) => (
            <tr key={target.targetId} data-target={target.targetId}>
              <td>
                <button
                  type="button"
                  class="target-pick"
                  aria-pressed={selected === target.targetId}
                  aria-label={`Show ${target.targetId}'s output and events`}
                  onClick={() => onSelect(selected === target.targetId ? undefined : target.targetId)}
                >
                  {target.targetId}
                </button>
              </td>
              <td>
                <span class={`badge status-${target.status}`}>{statusWords(target.status)}</span>
                {target.error && <div class="error">{target.error.message}</div>}
              </td>
              <td>{target.attempt > 0 ? target.attempt : '—'}</td>
              <td>
                {target.startedAt && (
                  <time dateTime={target.startedAt}>{new Date(target.startedAt).toLocaleTimeString()}</time>
                )}{' '}
                {duration(target.startedAt, target.endedAt)}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {matching.length > page.length && (
        <button type="button" onClick={() => setShown((n) => n + PAGE)}>
          Show {Math.min(PAGE, matching.length - page.length)} more of {matching.length - page.length}
        </button>
      )}
    </div>
  );
}
