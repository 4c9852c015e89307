import type { Command } from 'commander';
import { dashboardMetricsSchema } from '../../shared/resources/api-schemas.js';
import { type ContextFor, example } from '../context.js';
import { age, paint, statusStyle, table } from '../output.js';

/** Counts above zero, as `status count` rows; every key when all are zero would be noise. */
const nonZero = (counts: Readonly<Record<string, number>>): string[][] =>
  Object.entries(counts)
    .filter(([, n]) => n > 0)
    .map(([key, n]) => [key, String(n)]);

/** `status`: the tenant's figures from `GET /v1/dashboard/metrics`. */
export function registerStatusCommand(program: Command, contextFor: ContextFor): void {
  example(
    program
      .command('status')
      .description(
        'the tenant at a glance: runs by status, waiting approvals, failures in the last hour; queues and workers for the platform tenant',
      ),
    'capstan status',
    'capstan status --json | jq .runs.byStatus',
  ).action(async function (this: Command) {
    const context = contextFor(this);
    const { data, raw } = await context.client().request('GET', '/dashboard/metrics', dashboardMetricsSchema);
    if (context.output.json) return context.output.data(raw);
    const { output } = context;
    const runs = nonZero(data.runs.byStatus).map(([status = '', n = '']) => [
      paint(output, statusStyle(status), status),
      n,
    ]);
    const counted = data.runs.complete ? '' : ` (the newest ${data.runs.counted})`;
    output.line(`tenant ${data.tenantId} at ${data.at}`);
    output.line('');
    output.line(`runs${counted}:`);
    output.line(runs.length > 0 ? table(output, ['status', 'runs'], runs) : 'no runs');
    output.line('');
    const oldest = data.approvals.oldestWaitingSeconds;
    output.line(`approvals waiting: ${data.approvals.waiting}` + (oldest === null ? '' : ` (oldest ${age(oldest)})`));
    output.line(`failed in the last hour: ${data.failures.lastHour}`);
    if (data.queues) {
      output.line('');
      output.line(
        table(
          output,
          ['profile', 'queued'],
          Object.entries(data.queues).map(([p, n]) => [p, String(n)]),
        ),
      );
    }
    if (data.workers) {
      const workers = nonZero(data.workers);
      output.line('');
      output.line(workers.length > 0 ? table(output, ['worker status', 'workers'], workers) : 'no workers registered');
    }
  });
}
