import type { RunEvent } from '../events.js';

/** What a run cost (seed 001 section 8), derived from its events alone so a bundle can recompute it. */
export interface CostRollup {
  /** Per step and kind: attempts dispatched and step executions that ran on a worker. */
  readonly steps: ReadonlyArray<{ stepId: string; kind: string; attempts: number; executions: number }>;
  /** Seconds workers spent executing, from `step.started` to its end, by backend and by sandbox profile. */
  readonly workerSeconds: {
    readonly total: number;
    readonly byBackend: Readonly<Record<string, number>>;
    readonly byProfile: Readonly<Record<string, number>>;
  };
  /**
   * Interpreter transitions the run caused, counted from the decisions it recorded (a dispatch,
   * a gate, an end): a lower bound of the Step Functions state transitions billed.
   */
  readonly interpreterDecisions: number;
  /** Run status changes recorded (started, gated, paused, resumed, rolling back, ended). */
  readonly runTransitions: number;
  readonly events: number;
}

const DECISIONS = new Set(['step.dispatched', 'approval.requested', 'run.succeeded', 'run.failed', 'run.cancelled']);
const TRANSITIONS = new Set([
  'run.started',
  'run.throttled',
  'approval.requested',
  'run.paused',
  'run.resumed',
  'rollback.started',
  'run.succeeded',
  'run.failed',
  'run.cancelled',
]);
const round = (n: number) => Math.round(n * 1000) / 1000;

/** The cost rollup of a run's events. */
export function costRollup(events: readonly RunEvent[]): CostRollup {
  const steps = new Map<string, { stepId: string; kind: string; attempts: number; executions: number }>();
  const started = new Map<string, { at: number; backend: string; profile: string }>();
  const byBackend: Record<string, number> = {};
  const byProfile: Record<string, number> = {};
  let total = 0;
  for (const event of events) {
    const kind = typeof event.payload.kind === 'string' ? event.payload.kind : 'step';
    const attempt = typeof event.payload.attempt === 'number' ? event.payload.attempt : 0;
    const stepKey = `${event.stepId ?? ''}/${kind}`;
    const executionKey = `${stepKey}/${attempt}/${event.targetId ?? ''}`;
    if (event.type === 'step.dispatched' && event.stepId !== undefined) {
      const entry = steps.get(stepKey) ?? { stepId: event.stepId, kind, attempts: 0, executions: 0 };
      entry.attempts = Math.max(entry.attempts, attempt);
      steps.set(stepKey, entry);
    }
    if (event.type === 'step.started') {
      const entry = steps.get(stepKey);
      if (entry) entry.executions++;
      started.set(executionKey, {
        at: Date.parse(event.timestamp),
        backend: String(event.payload.backend ?? 'unknown'),
        profile: event.meta.sandboxProfile ?? 'unknown',
      });
    }
    if (event.type === 'step.succeeded' || event.type === 'step.failed') {
      const start = started.get(executionKey);
      if (!start) continue;
      started.delete(executionKey);
      const seconds = Math.max(0, (Date.parse(event.timestamp) - start.at) / 1000);
      byBackend[start.backend] = round((byBackend[start.backend] ?? 0) + seconds);
      byProfile[start.profile] = round((byProfile[start.profile] ?? 0) + seconds);
      total += seconds;
    }
  }
  return {
    steps: [...steps.values()],
    workerSeconds: { total: round(total), byBackend, byProfile },
    interpreterDecisions: events.filter((e) => DECISIONS.has(e.type)).length,
    runTransitions: events.filter((e) => TRANSITIONS.has(e.type)).length,
    events: events.length,
  };
}
