import { type Command, Option } from 'commander';
import {
  decisionResultSchema,
  drainSchema,
  reconcileSummarySchema,
  workerListSchema,
} from '../../shared/resources/api-schemas.js';
import { type ContextFor, example } from '../context.js';
import { age, paint, statusStyle, table } from '../output.js';

const EXAMPLE_RUN = 'run-0b5c6f1e-2a7d-4a57-9a38-3f1c1d2e4b5a';

/** `approve`, `reject`, `workers list|drain` and `reconcile`. */
export function registerOperationCommands(program: Command, contextFor: ContextFor): void {
  for (const decision of ['approve', 'reject'] as const) {
    example(
      program
        .command(decision)
        .description(`${decision} a gate a run waits on (needs the approver or admin role)`)
        .argument('<runId>', 'the run id')
        .argument('<approvalId>', 'the gate, as `--wait` and `runs show` print it')
        .option('--notes <text>', 'why, kept with the decision'),
      `capstan ${decision} ${EXAMPLE_RUN} step.restart.1 --as approver${decision === 'reject' ? ' --notes "not during the freeze"' : ''}`,
    ).action(async function (this: Command, runId: string, approvalId: string) {
      const { notes } = this.opts<{ notes?: string }>();
      const context = contextFor(this);
      const { data, raw } = await context
        .client()
        .request(
          'POST',
          `/runs/${encodeURIComponent(runId)}/approvals/${encodeURIComponent(approvalId)}`,
          decisionResultSchema,
          { body: { decision, ...(notes !== undefined && { notes }) } },
        );
      if (context.output.json) return context.output.data(raw);
      const approvals = data.approval.decisions.filter((d) => d.decision === 'approve').length;
      context.output.line(
        `${approvalId}: ${data.counted ? `${decision} recorded` : 'you had decided already; counted once'}` +
          (data.resolved
            ? `; gate ${paint(context.output, statusStyle(data.resolved), data.resolved)}`
            : `; ${approvals}/${data.approval.requiredApprovals} approvals, still ${data.approval.status}`),
      );
    });
  }

  const workers = example(program.command('workers').description('list and drain workers'), 'capstan workers list');
  example(
    workers
      .command('list')
      .description('registered workers with their status as of now')
      .addOption(
        new Option('--status <status>', 'only workers in this status').choices([
          'idle',
          'busy',
          'draining',
          'offline',
          'dead',
          'deregistered',
        ]),
      )
      .option('--profile <profile>', 'only workers of this sandbox profile'),
    'capstan workers list',
    'capstan workers list --json | jq -r ".workers[].workerId"',
  ).action(async function (this: Command) {
    const options = this.opts<{ status?: string; profile?: string }>();
    const context = contextFor(this);
    const { data, raw } = await context
      .client()
      .request('GET', '/workers', workerListSchema, { query: { status: options.status, profile: options.profile } });
    if (context.output.json) return context.output.data(raw);
    const rows = data.workers.map((w) => [
      w.workerId,
      w.sandboxProfile,
      paint(
        context.output,
        statusStyle(w.status),
        w.drainRequested && w.status !== 'draining' ? `${w.status},drain-requested` : w.status,
      ),
      w.currentExecutionId ?? '-',
      age(w.secondsSinceHeartbeat),
      String(w.stats.tasksCompleted),
      `${Math.round(w.stats.cpuPercent)}%`,
      `${Math.round(w.stats.rssBytes / 1_048_576)}Mi`,
      w.version,
      `${w.hostname}:${w.pid}`,
    ]);
    context.output.line(
      rows.length === 0
        ? 'no workers registered'
        : table(
            context.output,
            ['name', 'profile', 'status', 'step', 'heartbeat', 'tasks', 'cpu', 'memory', 'version', 'host'],
            rows,
          ),
    );
  });
  example(
    workers
      .command('drain')
      .description('drain a worker: it finishes its step, deregisters and exits')
      .argument('<id>', 'the worker id (NAME in `workers list`)'),
    'capstan workers drain dev-flex-host-4242',
  ).action(async function (this: Command, workerId: string) {
    const context = contextFor(this);
    const { data, raw } = await context
      .client()
      .request('POST', `/workers/${encodeURIComponent(workerId)}/drain`, drainSchema);
    if (context.output.json) return context.output.data(raw);
    context.output.line(`worker ${data.workerId}: drain requested; it sees it within ${data.seenWithinSeconds} s`);
  });

  example(
    program.command('reconcile').description('run one reconciler sweep now and show what it repaired (admin)'),
    'capstan reconcile --as admin',
  ).action(async function (this: Command) {
    const context = contextFor(this);
    const { data, raw } = await context.client().request('POST', '/reconcile', reconcileSummarySchema);
    if (context.output.json) return context.output.data(raw);
    const rows = Object.entries(data).map(([key, value]) => [key, String(value)]);
    context.output.line(table(context.output, ['repair', 'count'], rows));
  });
}
