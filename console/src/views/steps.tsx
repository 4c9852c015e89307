import type { RunDetail } from '../api.js';
import { duration, statusWords } from '../format.js';
import { CountChips, hasTargets, TargetList } from './targets.js';

/** The pseudo-step that selects the run's own events. */
export const RUN_LEVEL = '';

/** When a step started and ended, from its attempts. */
function span(run: RunDetail, stepId: string): { from?: string; to?: string } {
  const attempts = run.attempts.filter((a) => a.stepId === stepId && a.kind === 'step');
  const starts = attempts.flatMap((a) => (a.startedAt ? [a.startedAt] : [])).sort();
  const ends = attempts.flatMap((a) => (a.endedAt ? [a.endedAt] : [])).sort();
  return { from: starts[0], to: ends.at(-1) };
}

/**
 * The steps of a run with status, attempts and timings; a fan-out step shows its expected targets
 * and counts per status, and the selected one lists its targets, of which one may be selected.
 */
export function StepList(props: {
  run: RunDetail;
  selected: string;
  onSelect: (stepId: string) => void;
  target: string | undefined;
  onSelectTarget: (targetId: string | undefined) => void;
}) {
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
          const fanout = hasTargets(step);
          return (
            <li key={step.id} data-step={step.id}>
              <button type="button" class="step" aria-pressed={selected === step.id} onClick={() => onSelect(step.id)}>
                <span>
                  <strong>{step.id}</strong> <span class="muted">{`${step.backend}.${step.action}`}</span>
                </span>
                <span class={`badge status-${step.status}`}>{statusWords(step.status)}</span>
                <span class="muted">
                  {!fanout && step.attempts > 0 && `attempt ${step.attempts}`} {duration(from, to)}
                  {step.rollback && ` · rollback ${statusWords(step.rollback.status)}`}
                </span>
              </button>
              {fanout &&
                (selected === step.id ? (
                  <TargetList step={step} selected={props.target} onSelect={props.onSelectTarget} />
                ) : (
                  <CountChips step={step} />
                ))}
            </li>
          );
        })}
      </ul>
    </section>
  );
}
