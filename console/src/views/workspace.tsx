import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { describeError, type RunDetail, type RunEvent } from '../api.js';
import { CAN_OPERATE, hasRole } from '../auth/session.js';
import { useSession } from '../context.js';
import { age, duration, eventWords, reasonInWords, TERMINAL } from '../format.js';
import { ApprovalPanel } from './approval-panel.js';
import { ActionButton } from './confirm.js';
import { StatusBadge } from './runs.js';
import { RUN_LEVEL, StepList } from './steps.js';

/** The timeline shows this many of the selected events, newest last: a 1,000-target step is not drawn whole. */
const TIMELINE_MAX = 300;

/** The run workspace: steps and targets on one side, the selected step's output and events on the other. */
export function WorkspaceScreen({ runId }: { runId: string }) {
  const { api, stream, identity } = useSession();
  const [run, setRun] = useState<RunDetail>();
  const [error, setError] = useState<string>();
  const [events, setEvents] = useState<RunEvent[]>([]);
  const [selected, setSelected] = useState<string>();
  const [target, setTarget] = useState<string>();
  const loading = useRef<Promise<void> | undefined>(undefined);
  const again = useRef(false);

  /** Reads the run detail; calls during a read coalesce into one more read after it. */
  const reload = useCallback(() => {
    if (loading.current) {
      again.current = true;
      return;
    }
    loading.current = api.run(runId).then(
      (detail) => {
        setRun(detail);
        setError(undefined);
      },
      (failure: unknown) => setError(describeError(failure)),
    );
    void loading.current.finally(() => {
      loading.current = undefined;
      if (again.current) {
        again.current = false;
        reload();
      }
    });
  }, [api, runId]);

  useEffect(() => {
    setRun(undefined);
    setEvents([]);
    setSelected(undefined);
    setTarget(undefined);
    reload();
    return stream.subscribe(runId, (batch) => {
      setEvents((current) => [...current, ...batch]);
      // Output lines change only the output pane; anything else may move a step, a target or a gate.
      if (batch.some((e) => e.type !== 'step.output')) reload();
    });
  }, [runId, stream, reload]);

  if (!run)
    return error ? (
      <p role="alert" class="error">
        {error}
      </p>
    ) : (
      <p aria-busy="true">Loading run…</p>
    );

  const step = selected ?? run.currentStepId ?? run.steps[0]?.id ?? RUN_LEVEL;
  const operate = hasRole(identity, CAN_OPERATE);
  const ended = TERMINAL.includes(run.status);
  const reason = reasonInWords(run);
  const stepEvents = events.filter(
    (e) =>
      (step === RUN_LEVEL ? e.stepId === undefined : e.stepId === step) &&
      (target === undefined || e.targetId === target),
  );
  const output = stepEvents.filter((e) => e.type === 'step.output');
  const timeline = stepEvents.filter((e) => e.type !== 'step.output');
  const shownTimeline = timeline.slice(-TIMELINE_MAX);
  // The stream replays every event, so the detail's tail only fills the pane until the replay arrives.
  const tail =
    target === undefined
      ? []
      : (run.steps.find((s) => s.id === step)?.targets.find((t) => t.targetId === target)?.outputTail ?? []);
  const outputText =
    output.length > 0
      ? output
          .map(
            (e) =>
              `${target === undefined && e.targetId && e.targetId !== '-' ? `[${e.targetId}] ` : ''}${eventWords(e)}`,
          )
          .join('\n')
      : tail.length > 0
        ? tail.join('\n')
        : 'No output yet.';
  const selectStep = (id: string) => {
    setSelected(id);
    setTarget(undefined);
  };
  return (
    <section aria-labelledby="run-title" class="workspace">
      <header class="run-head">
        <h1 id="run-title">
          {run.runbookId} v{run.runbookVersion} <StatusBadge status={run.status} />
        </h1>
        <p class="muted">
          {run.runId} · requested by {run.requestedBy} {age(run.createdAt)} ago
          {run.ticket && ` · ticket ${run.ticket.id}`}
          {run.endedAt && ` · took ${duration(run.startedAt ?? run.createdAt, run.endedAt)}`}
        </p>
        {reason && (
          <p class={run.status === 'failed' ? 'reason error' : 'reason'} data-testid="reason">
            {reason}
          </p>
        )}
        {error && (
          <p role="alert" class="error">
            {error}
          </p>
        )}
        {operate && !ended && (
          <div class="row actions" role="group" aria-label="Operator actions">
            {run.status === 'paused' ? (
              (['retry', 'rollback', 'cancel'] as const).map((directive) => (
                <ActionButton
                  key={directive}
                  label={`Resume: ${directive}`}
                  danger={directive !== 'retry'}
                  question={
                    {
                      retry: `Retry step ${run.currentStepId ?? ''} of this run?`,
                      rollback: 'Roll back every step this run has done, newest first?',
                      cancel: 'Cancel this run where it stands?',
                    }[directive]
                  }
                  confirmLabel={`Yes, ${directive}`}
                  run={() => api.resume(run.runId, directive)}
                  onDone={reload}
                />
              ))
            ) : (
              <>
                <ActionButton
                  label="Cancel run"
                  danger
                  question="Cancel this run? Steps in flight finish; nothing new starts."
                  confirmLabel="Yes, cancel the run"
                  run={() => api.cancel(run.runId)}
                  onDone={reload}
                />
                {run.status !== 'rolling_back' && (
                  <ActionButton
                    label="Roll back"
                    danger
                    question="Roll back every step this run has done, newest first?"
                    confirmLabel="Yes, roll back"
                    run={() => api.rollback(run.runId)}
                    onDone={reload}
                  />
                )}
              </>
            )}
          </div>
        )}
        {run.status === 'waiting_for_approval' && <ApprovalPanel run={run} onDecided={reload} />}
      </header>
      <div class="panes">
        <StepList run={run} selected={step} onSelect={selectStep} target={target} onSelectTarget={setTarget} />
        <section class="pane" aria-labelledby="live-title">
          <h2 id="live-title">
            {step === RUN_LEVEL ? 'Run events' : `Step ${step}`}
            {target !== undefined && ` on ${target}`}
          </h2>
          {target !== undefined && (
            <button type="button" onClick={() => setTarget(undefined)}>
              Show every target
            </button>
          )}
          <h3>Output</h3>
          <pre class="output" aria-live="polite" data-testid="output" tabIndex={0}>
            {outputText}
          </pre>
          <h3>Timeline</h3>
          {timeline.length > shownTimeline.length && (
            <p class="muted">
              The last {shownTimeline.length} of {timeline.length} events; pick a target to see its own.
            </p>
          )}
          <ol class="timeline" data-testid="timeline">
            {shownTimeline.map((e) => (
              <li key={e.seq} data-type={e.type}>
                <time dateTime={e.timestamp}>{new Date(e.timestamp).toLocaleTimeString()}</time>{' '}
                <strong>{e.type}</strong>
                {e.targetId && e.targetId !== '-' && <span class="muted"> [{e.targetId}]</span>} {eventWords(e)}
              </li>
            ))}
          </ol>
        </section>
      </div>
    </section>
  );
}
