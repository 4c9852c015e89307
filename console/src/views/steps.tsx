import type { RunDetail } from '../api.js';
import { duration, statusWords } from '../format.js';
/** The pseudo-step that selects the run's own events. */
export const RUN_LEVEL = '';

/** When a step (or one target of it) started and ended, from its attempts. */
function span(run: RunDetail, stepId: string, targetId?: string): { from?: string; to?: string } {
  const attempts = run.attempts.filter(
    (a) => a.stepId === stepId && a.kind === 'step' && (targetId === undefined || a.targetId === targetId),
  );
  const starts = attempts.flatMap((a) => (a.startedAt ? [a.startedAt] : [])).sort();
  const ends = attempts.flatMap((a) => (a.endedAt ? [a.endedAt] : [])).sort();
  return { from: starts[0], to: ends.at(-1) };
}

/** The steps of a run with status, attempts and timings, and each step's targets; one is selected. */
export function StepList(props: { run: RunDetail; selected: string; onSelect: (stepId: string) => void }) {
  const { run, selected, onSelect } = props;
  return (
    <section class="pane" aria-labelledby="steps-title">
      <h2 id="steps-title">Steps</h2>
      <ul class="steps">
        <li>
          <button type="button" class="step" aria-pressed={selected === RUN_LEVEL} onClick={() => onSelect(RUN_LEVEL)}>
            <span>Run events</span>
          </button>
        </li>
        {run.steps.map((step) => {
          const { from, to } = span(run, step.id);
          return (
            <li key={step.id} data-step={step.id}>
              <button type="button" class="step" aria-pressed={selected === step.id} onClick={() => onSelect(step.id)}>
                <span>
                  <strong>{step.id}</strong> <span class="muted">{`${step.backend}.${step.action}`}</span>
                </span>
                <span class={`badge status-${step.status}`}>{statusWords(step.status)}</span>
                <span class="muted">
                  {step.attempts > 0 && `attempt ${step.attempts}`} {duration(from, to)}
                  {step.rollback && ` · rollback ${statusWords(step.rollback.status)}`}
                </span>
              </button>
              {step.targets.length > 0 && (step.targets.length > 1 || step.targets[0]?.targetId !== '-') && (
                <table class="targets">
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
                    {step.targets.map((target) => {
                      const t = span(run, step.id, target.targetId);
                      return (
                        <tr key={target.targetId}>
                          <td>{target.targetId}</td>
                          <td>
                            {statusWords(target.status)}
                            {target.error && <span class="error"> {target.error.message}</span>}
                          </td>
                          <td>{target.attempt}</td>
                          <td>{duration(t.from, t.to)}</td>
                        </tr>
                      );
                    })}
                  </tbody>
                </table>
              )}
            </li>
          );
        })}
      </ul>
    </section>
  );
}
