import type { RunDetail } from '../shared/resources/api-schemas.js';
import type { StreamEvent } from './follow.js';
import { type Output, paint, statusStyle, table } from './output.js';

/** The target of an untargeted step: not worth showing. */
const ONCE = 'once';

const str = (value: unknown) => (typeof value === 'string' ? value : value === undefined ? '' : JSON.stringify(value));
const errorText = (error: unknown) => {
  if (error === null || typeof error !== 'object') return str(error);
  const { code, message } = error as { code?: unknown; message?: unknown };
  return [code, message].filter((part) => typeof part === 'string' && part !== '').join(': ');
};

/** The commands that decide a gate, as a user copies them. */
export const decideCommands = (runId: string, approvalId: string) => [
  `capstan approve ${runId} ${approvalId} --as approver`,
  `capstan reject ${runId} ${approvalId} --as approver --notes "<why>"`,
];

/** The command that gives a paused run its directive. */
export const resumeCommand = (runId: string) => `capstan runs resume ${runId} --directive retry|rollback|cancel`;

/** `step`, or `step@target` once a step has targets of its own. */
function where(event: Pick<StreamEvent, 'stepId' | 'targetId'>): string {
  const step = event.stepId ?? '';
  return event.targetId && event.targetId !== ONCE ? `${step}@${event.targetId}` : step;
}

/**
 * One event as the lines `--wait` and `runs watch` print: progress per step (and per target),
 * output lines, gates with the command that decides them, and how the run ended. Events with
 * nothing to say for a person answer no lines.
 */
export function describeEvent(out: Pick<Output, 'color'>, event: StreamEvent): string[] {
  const p = event.payload;
  const at = where(event);
  const mark = (style: Parameters<typeof paint>[1], text: string) => paint(out, style, text);
  const attempt = typeof p.attempt === 'number' && p.attempt > 1 ? ` (attempt ${p.attempt})` : '';
  const rollback = p.kind === 'rollback' ? 'rollback of ' : '';
  switch (event.type) {
    case 'run.created':
      return [`run ${event.runId} created: ${str(p.runbookId)} v${str(p.runbookVersion)}`];
    case 'run.started':
      return ['run started'];
    case 'run.throttled':
      return [
        mark(
          'yellow',
          `throttled: ${heldText(
            typeof p.limit === 'string' ? p.limit : undefined,
            typeof p.source === 'string' ? p.source : undefined,
            typeof p.nextEligibleAt === 'string' ? p.nextEligibleAt : undefined,
          )}`,
        ),
      ];
    case 'step.started':
      return [
        `${mark('cyan', 'started')}    ${rollback}${at}${attempt}${event.meta.workerId ? mark('dim', ` on ${event.meta.workerId}`) : ''}`,
      ];
    case 'step.output':
      return [`  ${mark('dim', `${at} |`)} ${p.stream === 'stderr' ? mark('red', str(p.text)) : str(p.text)}`];
    case 'step.succeeded':
      return [`${mark('green', 'succeeded')}  ${rollback}${at}${attempt}`];
    case 'step.failed':
      return [`${mark('red', 'failed')}     ${rollback}${at}${attempt}: ${errorText(p.error)}`];
    case 'step.retry_scheduled':
      return [`${mark('yellow', 'retrying')}   ${at}${p.notBefore ? ` after ${str(p.notBefore)}` : ''}`];
    case 'step.skipped':
      return [`${mark('dim', 'skipped')}    ${at}${p.reason ? `: ${str(p.reason)}` : ''}`];
    case 'approval.requested': {
      const id = str(p.approvalId);
      return [
        `${mark('yellow', 'waiting')}    for approval ${id} on ${event.stepId ?? str(p.scopeId)}: ${str(p.reason)} (needs ${str(p.requiredApprovals)})`,
        ...decideCommands(event.runId, id).map((command) => `             ${mark('bold', command)}`),
      ];
    }
    case 'approval.decision_recorded':
      return [`decision   ${str(p.approver)} ${str(p.decision)}d ${str(p.approvalId)}`];
    case 'approval.resolved':
      return [`${mark(statusStyle(str(p.status)), 'gate')}       ${str(p.approvalId)} ${str(p.status)}`];
    case 'approval.escalated':
      return [mark('yellow', `escalated  ${str(p.approvalId)}: past its SLA, still waiting`)];
    case 'approval.expired':
      return [mark('red', `expired    ${str(p.approvalId)}`)];
    case 'run.paused':
      return [
        `${mark('yellow', 'paused')}     ${str(p.reason)}`,
        `             ${mark('bold', resumeCommand(event.runId))}`,
      ];
    case 'run.resumed':
      return [`resumed    ${str(p.directive)} by ${str(p.by)}`];
    case 'run.cancel_requested':
      return [`cancel requested by ${str(p.requestedBy)}`];
    case 'rollback.started':
      return [mark('yellow', `rolling back (${str(p.reason)})`)];
    case 'rollback.completed':
      return ['rollback completed'];
    case 'sandbox.violation':
      return [mark('red', `sandbox violation on ${at}: ${str(p.reason ?? p.message)}`)];
    case 'run.succeeded':
      return [mark('green', 'run succeeded')];
    case 'run.failed':
      return [mark('red', `run failed${p.error ? `: ${errorText(p.error)}` : ''}`)];
    case 'run.cancelled':
      return [mark('red', 'run cancelled')];
    default:
      return [];
  }
}

/** What holds a throttled run back, in words: the limit, the source it names, when it is looked at again. */
export function heldText(limit: string | undefined, source: string | undefined, nextEligibleAt: string | undefined) {
  const again = nextEligibleAt ? `; admission looks again at ${nextEligibleAt}` : '';
  switch (limit) {
    case 'paused':
      return `${source ?? 'its source'} is paused; it waits until resumed (capstan limits resume ${source ?? '<source>'})`;
    case 'throttle':
      return `${source ?? 'its source'} is throttled${again}`;
    case 'breaker':
      return `the circuit breaker of ${source ?? 'its runbook'} is open${again}`;
    case 'backlog':
      return `its sandbox profile's queue is full${again}`;
    case undefined:
      return nextEligibleAt ? `over quota until ${nextEligibleAt}` : 'over quota';
    default:
      return `over its quota (${limit})${again}`;
  }
}

/** Why a run failed, was cancelled, or waits: one line, or undefined for a run that does neither. */
export function runReason(run: RunDetail): string | undefined {
  const failedAttempt = run.attempts.findLast((a) => a.error !== undefined && a.kind === 'step');
  switch (run.status) {
    case 'failed':
      if (run.error)
        return `${run.error.code}: ${run.error.message}${run.error.stepId ? ` (step ${run.error.stepId})` : ''}`;
      return failedAttempt?.error
        ? `step ${failedAttempt.stepId} failed: ${failedAttempt.error.code}: ${failedAttempt.error.message}`
        : 'failed';
    case 'cancelled':
      return run.error ? `${run.error.code}: ${run.error.message}` : 'cancelled on request';
    case 'paused':
      return run.pausedReason ?? (run.error ? `${run.error.code}: ${run.error.message}` : 'paused for an operator');
    case 'waiting_for_approval': {
      const open = run.approvals.filter((a) => a.status === 'requested' || a.status === 'escalated');
      return open.map((a) => `approval ${a.approvalId} on ${a.stepId}: ${a.reason}`).join('; ') || 'an approval';
    }
    case 'throttled':
      return heldText(run.heldBy?.limit, run.heldBy?.source, run.nextEligibleAt);
    case 'queued':
      if (run.queuedBehind !== undefined) return `the ticket's run ${run.queuedBehind} to end`;
      return run.dependsOn?.length && !run.admission ? `runs ${run.dependsOn.join(', ')} to succeed` : undefined;
    default:
      return undefined;
  }
}

/** What a waiting or paused run waits for, when the API says (`waitingFor`). */
function waitingText(waitingFor: Record<string, unknown> | undefined): string | undefined {
  if (!waitingFor) return undefined;
  return Object.entries(waitingFor)
    .map(([key, value]) => `${key}=${str(value)}`)
    .join(' ');
}

/** `runs show`: the run, its steps and targets, gates, attempts, and why it failed or waits. */
export function renderRun(out: Pick<Output, 'color'>, run: RunDetail): string {
  const status = paint(out, statusStyle(run.status), run.status);
  const reason = runReason(run);
  const waiting = waitingText(run.waitingFor);
  const head: Array<[string, string | undefined]> = [
    ['Run', run.runId],
    ['Runbook', `${run.runbookId} v${run.runbookVersion}`],
    ['Status', status],
    [run.status === 'failed' || run.status === 'cancelled' ? 'Reason' : 'Waiting on', reason],
    ['Waiting for', waiting],
    ['Current step', run.currentStepId],
    ['Ticket', run.ticket ? `${run.ticket.source}:${run.ticket.id}` : undefined],
    [
      'Incident',
      run.incident
        ? `${run.incident.reason ?? 'raised'} at ${run.incident.raisedAt}` +
          (run.incident.acknowledgedBy
            ? `, acknowledged by ${run.incident.acknowledgedBy}`
            : `; acknowledge: capstan incidents ack ${run.runId}`)
        : undefined,
    ],
    ['Priority', run.priority],
    ['Requested', `${run.requestedBy} at ${run.createdAt}`],
    ['Ended', run.endedAt],
  ];
  const lines = head.flatMap(([k, v]) => (v === undefined ? [] : [`${`${k}:`.padEnd(14)}${v}`]));
  const stepRows = run.steps.flatMap((step) => {
    const targets = step.targets.filter((t) => t.targetId !== ONCE);
    const row = [
      step.id,
      step.phase,
      `${step.backend}.${step.action}`,
      paint(out, statusStyle(step.status), step.status),
      String(step.attempts),
      step.targets.length === 0 ? '-' : targets.length === 0 ? '1' : String(step.targets.length),
      step.rollback ? step.rollback.status : '-',
    ];
    const perTarget = targets.map((t) => [
      `  @${t.targetId}`,
      '',
      '',
      paint(out, statusStyle(t.status), t.status),
      String(t.attempt),
      '',
      t.error ? `${t.error.code}: ${t.error.message}` : '',
    ]);
    return [row, ...perTarget];
  });
  lines.push('', table(out, ['step', 'phase', 'action', 'status', 'attempts', 'targets', 'rollback'], stepRows));
  if (run.approvals.length > 0) {
    lines.push(
      '',
      table(
        out,
        ['approval', 'step', 'status', 'approvals', 'decisions'],
        run.approvals.map((a) => [
          a.approvalId,
          a.stepId,
          paint(out, statusStyle(a.status), a.status),
          `${a.decisions.filter((d) => d.decision === 'approve').length}/${a.requiredApprovals}`,
          a.decisions.map((d) => `${d.approver}:${d.decision}${d.notes ? ` "${d.notes}"` : ''}`).join(', ') || '-',
        ]),
      ),
    );
    for (const a of run.approvals.filter((g) => g.status === 'requested' || g.status === 'escalated'))
      lines.push(...decideCommands(run.runId, a.approvalId).map((c) => `  ${paint(out, 'bold', c)}`));
  }
  if (run.status === 'paused') lines.push(`  ${paint(out, 'bold', resumeCommand(run.runId))}`);
  if (run.attempts.length > 0) {
    lines.push(
      '',
      table(
        out,
        ['attempt', 'kind', 'target', 'status', 'started', 'ended', 'error'],
        run.attempts.map((a) => [
          `${a.stepId}#${a.attempt}`,
          a.kind,
          a.targetId,
          paint(out, statusStyle(a.status), a.status),
          a.startedAt ?? '-',
          a.endedAt ?? '-',
          a.error ? `${a.error.code}: ${a.error.message}` : '',
        ]),
      ),
    );
  }
  const tails = run.steps.flatMap((step) =>
    step.targets.flatMap((t) =>
      t.outputTail.map(
        (text) => `  ${paint(out, 'dim', `${t.targetId === ONCE ? step.id : `${step.id}@${t.targetId}`} |`)} ${text}`,
      ),
    ),
  );
  if (tails.length > 0) lines.push('', 'Output (tail):', ...tails);
  return lines.join('\n');
}
