import { type Command, InvalidArgumentError } from 'commander';
import {
  breakerListSchema,
  breakerStateSchema,
  limitListSchema,
  limitViewSchema,
  quotaListSchema,
  quotaViewSchema,
} from '../../shared/resources/admission-schemas.js';
import { incidentViewSchema } from '../../shared/resources/api-schemas.js';
import { type ContextFor, example } from '../context.js';
import { paint, table } from '../output.js';

const EXAMPLE_RUN = 'run-0b5c6f1e-2a7d-4a57-9a38-3f1c1d2e4b5a';

const count = (value: string): number => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError('must be a whole number, 0 or more');
  return n;
};

const dash = (value: unknown) => (value === undefined ? '-' : String(value));

/** `quotas list|set`, `limits list|pause|resume|throttle`, `breakers list|reset` and `incidents ack`. */
export function registerAdmissionCommands(program: Command, contextFor: ContextFor): void {
  const quotas = example(
    program.command('quotas').description("the tenant's admission quotas per runbook (or `*` for all)"),
    'capstan quotas list',
  );
  example(quotas.command('list').description('every quota of the tenant'), 'capstan quotas list --json').action(
    async function (this: Command) {
      const context = contextFor(this);
      const { data, raw } = await context.client().request('GET', '/quotas', quotaListSchema);
      if (context.output.json) return context.output.data(raw);
      const rows = data.quotas.map((q) => [
        q.runbook,
        dash(q.maxActive),
        dash(q.maxPerHour),
        dash(q.burst),
        dash(q.emergency?.maxActive),
        q.updatedBy,
      ]);
      context.output.line(
        rows.length === 0
          ? 'no quotas: every run is admitted at once'
          : table(context.output, ['runbook', 'max active', 'per hour', 'burst', 'emergency', 'set by'], rows),
      );
    },
  );
  example(
    quotas
      .command('set')
      .description('set a quota (admin); with --merge only the given fields change')
      .argument('<runbook>', 'a runbook id, or `*` for every runbook of the tenant')
      .option('--max-active <n>', 'runs active at once', count)
      .option('--max-per-hour <n>', 'runs admitted per clock hour', count)
      .option('--burst <n>', 'token bucket capacity', count)
      .option('--emergency-max-active <n>', 'emergency runs active at once, besides the others', count)
      .option('--merge', 'change only the given fields (PATCH) instead of replacing the quota (PUT)'),
    'capstan quotas set restart-web --max-active 3 --max-per-hour 20 --as admin',
    'capstan quotas set "*" --burst 10 --merge --as admin',
  ).action(async function (this: Command, runbook: string) {
    const o = this.opts<{
      maxActive?: number;
      maxPerHour?: number;
      burst?: number;
      emergencyMaxActive?: number;
      merge?: boolean;
    }>();
    const context = contextFor(this);
    const body = {
      ...(o.maxActive !== undefined && { maxActive: o.maxActive }),
      ...(o.maxPerHour !== undefined && { maxPerHour: o.maxPerHour }),
      ...(o.burst !== undefined && { burst: o.burst }),
      ...(o.emergencyMaxActive !== undefined && { emergency: { maxActive: o.emergencyMaxActive } }),
    };
    const { data, raw } = await context
      .client()
      .request(o.merge ? 'PATCH' : 'PUT', `/quotas/${encodeURIComponent(runbook)}`, quotaViewSchema, {
        body: o.merge ? body : { runbook, ...body },
      });
    if (context.output.json) return context.output.data(raw);
    context.output.line(
      `quota on ${data.runbook}: max active ${dash(data.maxActive)}, per hour ${dash(data.maxPerHour)}, ` +
        `burst ${dash(data.burst)}, emergency ${dash(data.emergency?.maxActive)}`,
    );
  });

  const limits = example(
    program.command('limits').description('pause, resume and throttle a source (a runbook or a trigger source)'),
    'capstan limits list',
  );
  example(limits.command('list').description('paused and throttled sources'), 'capstan limits list').action(
    async function (this: Command) {
      const context = contextFor(this);
      const { data, raw } = await context.client().request('GET', '/limits', limitListSchema);
      if (context.output.json) return context.output.data(raw);
      const rows = data.limits.map((l) => [
        l.source,
        paint(context.output, l.kind === 'pause' ? 'yellow' : undefined, l.kind),
        l.kind === 'throttle' ? `${l.maxPerMinute}/min until ${l.until}` : '-',
        l.reason,
        l.by,
        l.at,
      ]);
      context.output.line(
        rows.length === 0
          ? 'no source is paused or throttled'
          : table(context.output, ['source', 'control', 'rate', 'reason', 'by', 'at'], rows),
      );
    },
  );
  for (const action of ['pause', 'resume'] as const)
    example(
      limits
        .command(action)
        .description(
          action === 'pause' ? "hold a source's new runs as throttled" : 'lift a pause or throttle; held runs start',
        )
        .argument('<source>', 'a runbook id, `api`, `eventbridge:<source>` or `webhook:<source>`')
        .requiredOption('--reason <text>', 'why, kept in the control log'),
      `capstan limits ${action} restart-web --reason "${action === 'pause' ? 'database maintenance' : 'maintenance done'}"`,
    ).action(async function (this: Command, source: string) {
      const { reason } = this.opts<{ reason: string }>();
      const context = contextFor(this);
      const { raw } = await context
        .client()
        .request('POST', `/limits/${action}`, limitViewSchema, { body: { source, reason } });
      if (context.output.json) return context.output.data(raw);
      context.output.line(`${source}: ${action === 'pause' ? 'paused' : 'resumed'}`);
    });
  example(
    limits
      .command('throttle')
      .description('admit at most N runs of a source per clock minute until a time')
      .argument('<source>', 'a runbook id, `api`, `eventbridge:<source>` or `webhook:<source>`')
      .requiredOption('--max-per-minute <n>', 'runs admitted per minute', count)
      .requiredOption('--until <iso>', 'when the throttle ends (ISO 8601)')
      .requiredOption('--reason <text>', 'why, kept in the control log'),
    'capstan limits throttle webhook:servicenow --max-per-minute 6 --until 2026-12-01T18:00:00Z --reason "ticket storm"',
  ).action(async function (this: Command, source: string) {
    const o = this.opts<{ maxPerMinute: number; until: string; reason: string }>();
    const context = contextFor(this);
    const { raw } = await context.client().request('POST', '/limits/throttle', limitViewSchema, {
      body: { source, maxPerMinute: o.maxPerMinute, until: o.until, reason: o.reason },
    });
    if (context.output.json) return context.output.data(raw);
    context.output.line(`${source}: at most ${o.maxPerMinute} runs a minute until ${o.until}`);
  });

  const breakers = example(
    program.command('breakers').description("runbooks' circuit breakers"),
    'capstan breakers list',
  );
  example(breakers.command('list').description('every breaker with its state'), 'capstan breakers list').action(
    async function (this: Command) {
      const context = contextFor(this);
      const { data, raw } = await context.client().request('GET', '/breakers', breakerListSchema);
      if (context.output.json) return context.output.data(raw);
      const rows = data.breakers.map((b) => [
        b.runbookId,
        paint(context.output, b.state === 'closed' ? 'green' : b.state === 'open' ? 'red' : 'yellow', b.state),
        `${b.outcomes.filter((ok) => !ok).length}/${b.outcomes.length}`,
        b.state === 'closed' ? '-' : b.openUntil || '-',
        b.probeRunId ?? '-',
      ]);
      context.output.line(
        rows.length === 0
          ? 'no breaker has counted a run yet'
          : table(context.output, ['runbook', 'state', 'failed', 'open until', 'probe'], rows),
      );
    },
  );
  example(
    breakers
      .command('reset')
      .description("close a runbook's breaker; the runs it held start")
      .argument('<runbook>', 'the runbook id')
      .option('--reason <text>', 'why, kept in the control log'),
    'capstan breakers reset restart-web --reason "fixed the dependency"',
  ).action(async function (this: Command, runbook: string) {
    const { reason } = this.opts<{ reason?: string }>();
    const context = contextFor(this);
    const { data, raw } = await context
      .client()
      .request('POST', `/breakers/${encodeURIComponent(runbook)}/reset`, breakerStateSchema, {
        body: reason === undefined ? {} : { reason },
      });
    if (context.output.json) return context.output.data(raw);
    context.output.line(`${data.runbookId}: breaker ${paint(context.output, 'green', data.state)}`);
  });

  const incidents = example(
    program.command('incidents').description('incidents raised on runs'),
    `capstan incidents ack ${EXAMPLE_RUN}`,
  );
  example(
    incidents
      .command('ack')
      .description("acknowledge a run's incident (operator or admin)")
      .argument('<runId>', 'the run id'),
    `capstan incidents ack ${EXAMPLE_RUN}`,
  ).action(async function (this: Command, runId: string) {
    const context = contextFor(this);
    const { data, raw } = await context
      .client()
      .request('POST', `/runs/${encodeURIComponent(runId)}/incident/ack`, incidentViewSchema);
    if (context.output.json) return context.output.data(raw);
    context.output.line(
      `${runId}: incident (${data.reason ?? 'raised'} at ${data.raisedAt}) acknowledged by ${dash(data.acknowledgedBy)}`,
    );
  });
}
