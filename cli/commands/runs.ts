import { dryRunPlanSchema, type DryRunPlan } from '../../shared/app/dry-run.js';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { type Command, Option } from 'commander';
import { z } from 'zod';
import { PRIORITIES } from '../../shared/domain/entities.js';
import { inputSpecSchema } from '../../shared/domain/runbook.js';
import { RUN_STATUSES } from '../../shared/domain/statuses.js';
import {
  cancelledSchema,
  eventPageSchema,
  resumedSchema,
  rollbackSchema,
  runAcceptedSchema,
  runbookVersionViewSchema,
  runDetailSchema,
  runPageSchema,
} from '../../shared/resources/api-schemas.js';
import { type Context, type ContextFor, example } from '../context.js';
import { ApiError, FailedError, UsageError } from '../errors.js';
import { type StreamEvent, followRun, streamEventSchema } from '../follow.js';
import { buildInputs, parseInputFile } from '../inputs.js';
import { age, paint, statusStyle, table } from '../output.js';
import { describeEvent, renderRun, runReason } from '../render.js';

const END_EVENTS = new Set(['run.succeeded', 'run.failed', 'run.cancelled']);
const collect = (value: string, previous: string[]) => [...previous, value];
const path = (runId: string, rest = '') => `/runs/${encodeURIComponent(runId)}${rest}`;

/** The test hook that drops the live stream after N events (off unless the variable is set). */
function dropAfter(context: Context): number | undefined {
  const text = context.env.CAPSTAN_CLI_TEST_DROP_AFTER;
  const value = text === undefined ? NaN : Number(text);
  return Number.isInteger(value) && value > 0 ? value : undefined;
}

/**
 * Follows a run to its end, printing each event (or, with `--json`, each envelope as a JSON
 * line and the run as the last line). A run that failed or was cancelled is a {@link FailedError}.
 */
export async function followToEnd(context: Context, runId: string): Promise<void> {
  const { output } = context;
  const client = context.client();
  const config = context.config();
  const drop = dropAfter(context);
  await followRun({
    runId,
    token: config.token,
    ...(config.wsUrl !== undefined && { wsUrl: config.wsUrl }),
    ...(drop !== undefined && { dropAfter: drop }),
    fetchEvents: async (since) =>
      (
        await client.request('GET', path(runId, '/events'), eventPageSchema, { query: { since, limit: 1000 } })
      ).data.events.map((event) => streamEventSchema.parse(event)),
    onEvent: (event: StreamEvent) => {
      if (output.json) output.data(event);
      else for (const line of describeEvent(output, event)) output.line(line);
    },
    isEnd: (event) => END_EVENTS.has(event.type),
    notice: (text) => output.error(paint(output, 'dim', text)),
  });
  const { data: run, raw } = await client.request('GET', path(runId), runDetailSchema);
  if (output.json) output.data(raw);
  const seconds =
    run.startedAt && run.endedAt
      ? ` in ${((Date.parse(run.endedAt) - Date.parse(run.startedAt)) / 1000).toFixed(1)} s`
      : '';
  if (run.status === 'succeeded') {
    if (!output.json) output.line(paint(output, 'green', `run ${runId} succeeded${seconds}`));
    return;
  }
  throw new FailedError(
    `run ${runId} ${run.status}: ${runReason(run) ?? run.status}`,
    `see \`capstan runs show ${runId}\``,
  );
}

export function registerRunCommands(program: Command, contextFor: ContextFor): void {
  example(
    program
      .command('run')
      .description('start a run of a runbook; with --wait, follow it live to its end (exit 1 if it fails)')
      .argument('<runbook>', 'the runbook id')
      .option('-i, --input <key=value>', 'an input value, typed as the runbook declares it (repeat it)', collect, [])
      .option('--input-file <file>', 'a JSON or YAML object of input values (--input wins)')
      .option('--ticket <id>', 'the ticket this run works on')
      .option('--ticket-source <source>', 'the ticket system', 'cli')
      .addOption(new Option('--priority <priority>', 'the run’s priority').choices(PRIORITIES))
      .option('--version <n>', 'a runbook version (default: the latest)')
      .option('--idempotency-key <key>', 'send the same key to start the run once however often you retry')
      .option('-w, --wait', 'follow the run live and exit with its outcome')
      .option('--dry-run', 'show the plan (targets, policy, gates, waves) without starting anything'),
    'capstan run hello --wait',
    'capstan run rolling-restart --dry-run',
    'capstan run restart-web --input service=nginx --ticket INC-42 --priority high --wait',
  ).action(async function (this: Command, runbookId: string) {
    const options = this.opts<{
      input: string[];
      inputFile?: string;
      ticket?: string;
      ticketSource: string;
      priority?: (typeof PRIORITIES)[number];
      version?: string;
      idempotencyKey?: string;
      wait?: boolean;
      dryRun?: boolean;
    }>();
    const context = contextFor(this);
    const version = options.version === undefined ? undefined : Number(options.version);
    if (version !== undefined && (!Number.isInteger(version) || version < 1))
      throw new UsageError(`--version ${options.version} is not a version number`, 'give a whole number such as 2');
    let fromFile = {};
    if (options.inputFile !== undefined) {
      let text: string;
      try {
        text = readFileSync(options.inputFile, 'utf8');
      } catch (error) {
        throw new UsageError(`cannot read ${options.inputFile}: ${(error as NodeJS.ErrnoException).code ?? ''}`);
      }
      fromFile = parseInputFile(options.inputFile, text);
    }
    const client = context.client();
    // The runbook's declarations type each --input (a number input gets a number).
    const runbook = await client
      .request('GET', `/runbooks/${encodeURIComponent(runbookId)}`, runbookVersionViewSchema, {
        query: { version },
      })
      .catch((error: unknown) => {
        if (error instanceof ApiError && error.code === 'NOT_FOUND')
          throw new ApiError(error.code, error.message, error.status, 'push it first: capstan runbooks push <file>');
        throw error;
      });
    const declared = z
      .record(z.string(), inputSpecSchema.pick({ type: true }))
      .catch({})
      .parse(runbook.data.definition.inputs ?? {});
    const inputs = buildInputs(options.input, fromFile, declared);
    if (options.dryRun) {
      const plan = await client.request('POST', '/runs', dryRunPlanSchema, {
        body: { runbookId, ...(version !== undefined && { version }), inputs, dryRun: true },
      });
      if (context.output.json) context.output.data(plan.raw);
      else for (const line of renderPlan(plan.data)) context.output.line(line);
      return;
    }
    const { data, raw } = await client.request('POST', '/runs', runAcceptedSchema, {
      body: {
        runbookId,
        ...(version !== undefined && { version }),
        inputs,
        ...(options.ticket !== undefined && { ticket: { id: options.ticket, source: options.ticketSource } }),
        ...(options.priority !== undefined && { priority: options.priority }),
      },
      headers: { 'Idempotency-Key': options.idempotencyKey ?? `cli-${randomUUID()}` },
    });
    if (context.output.json) context.output.data(raw);
    else context.output.line(`run ${data.runId} ${data.status}`);
    if (options.wait) await followToEnd(context, data.runId);
  });

  const runs = example(
    program.command('runs').description('list, show, watch and steer runs'),
    'capstan runs list --status failed',
  );

  example(
    runs
      .command('list')
      .description('runs, newest first')
      .addOption(new Option('--status <status>', 'only runs in this status').choices(RUN_STATUSES))
      .option('--ticket <id>', 'only the runs of this ticket')
      .option('--limit <n>', 'at most this many', '25'),
    'capstan runs list --status waiting_for_approval',
  ).action(async function (this: Command) {
    const options = this.opts<{ status?: string; ticket?: string; limit: string }>();
    const context = contextFor(this);
    const limit = Number(options.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw new UsageError('--limit must be 1 to 100');
    const { data, raw } = await context.client().request('GET', '/runs', runPageSchema, {
      query: { status: options.status, ticket: options.ticket, limit },
    });
    if (context.output.json) return context.output.data(raw);
    const now = Date.now();
    const rows = data.runs.map((run) => [
      run.runId,
      `${run.runbookId} v${run.runbookVersion}`,
      paint(context.output, statusStyle(run.status), run.status),
      run.priority,
      run.ticket?.id ?? '-',
      age((now - Date.parse(run.createdAt)) / 1000),
    ]);
    context.output.line(
      rows.length === 0
        ? 'no runs'
        : table(context.output, ['run', 'runbook', 'status', 'priority', 'ticket', 'age'], rows),
    );
  });

  example(
    runs
      .command('show')
      .description('a run: steps per target, attempts, gates, and why it failed or waits')
      .argument('<id>', 'the run id'),
    'capstan runs show run-0b5c6f1e-2a7d-4a57-9a38-3f1c1d2e4b5a',
  ).action(async function (this: Command, runId: string) {
    const context = contextFor(this);
    const { data, raw } = await context.client().request('GET', path(runId), runDetailSchema);
    if (context.output.json) context.output.data(raw);
    else context.output.line(renderRun(context.output, data));
  });

  example(
    runs
      .command('watch')
      .description('follow a run live, from its first event, to its end (exit 1 if it fails)')
      .argument('<id>', 'the run id'),
    'capstan runs watch run-0b5c6f1e-2a7d-4a57-9a38-3f1c1d2e4b5a',
  ).action(async function (this: Command, runId: string) {
    await followToEnd(contextFor(this), runId);
  });

  const steer = (
    name: string,
    description: string,
    send: (context: Context, runId: string, command: Command) => Promise<{ raw: unknown; text: string }>,
    extra: (command: Command) => Command = (c) => c,
  ) =>
    example(
      extra(runs.command(name).description(description).argument('<id>', 'the run id')),
      `capstan runs ${name} run-0b5c6f1e-2a7d-4a57-9a38-3f1c1d2e4b5a${name === 'resume' ? ' --directive retry' : ''}`,
    ).action(async function (this: Command, runId: string) {
      const context = contextFor(this);
      const { raw, text } = await send(context, runId, this);
      if (context.output.json) context.output.data(raw);
      else context.output.line(text);
    });

  steer('cancel', 'stop a run once its running steps finish', async (context, runId) => {
    const { data, raw } = await context.client().request('POST', path(runId, '/cancel'), cancelledSchema);
    return { raw, text: `run ${runId}: cancel requested (now ${data.status})` };
  });
  steer('rollback', 'undo what a run did, newest step first', async (context, runId) => {
    const { data, raw } = await context.client().request('POST', path(runId, '/rollback'), rollbackSchema);
    return { raw, text: `run ${runId}: rollback requested (now ${data.status})` };
  });
  steer(
    'resume',
    'give a paused run its directive',
    async (context, runId, command) => {
      const { directive } = command.opts<{ directive: string }>();
      const { data, raw } = await context
        .client()
        .request('POST', path(runId, '/resume'), resumedSchema, { body: { directive } });
      return { raw, text: `run ${runId}: ${data.directive} (now ${data.status})` };
    },
    (c) =>
      c.addOption(
        new Option('--directive <directive>', 'what the run does next')
          .choices(['retry', 'rollback', 'cancel'])
          .makeOptionMandatory(),
      ),
  );
  steer(
    'replay',
    'start a new run of the same runbook version with the same inputs',
    async (context, runId, command) => {
      const { reason } = command.opts<{ reason: string }>();
      const { data, raw } = await context
        .client()
        .request(
          'POST',
          path(runId, '/replay'),
          z.looseObject({ runId: z.string(), replayOf: z.string().optional() }),
          {
            body: { reason },
          },
        );
      return { raw, text: `run ${data.runId} replays ${runId}` };
    },
    (c) => c.option('--reason <text>', 'why it is replayed (kept in the audit trail)', 'replayed from the CLI'),
  );
}

/** A dry run's plan, a few lines per step. */
function renderPlan(plan: DryRunPlan): string[] {
  const lines = [`dry run of ${plan.runbook.id} v${plan.runbook.version}: nothing was started`];
  for (const step of plan.steps) {
    lines.push(`${step.phase}/${step.id}  ${step.backend}.${step.action}  (${step.mode}, ${step.condition})`);
    if (step.target !== undefined)
      lines.push(`  targets: ${step.target} -> ${step.targets.length > 0 ? step.targets.join(', ') : 'none'}`);
    if (step.maxConcurrency !== undefined)
      lines.push(
        `  waves: ${step.waves.join(', ')} (max_concurrency ${step.maxConcurrency}, max_errors ${step.maxErrors ?? 0}, ramp ${step.ramp ?? 'none'})`,
      );
    lines.push(`  policy: ${step.policy.outcome} (${step.policy.rule}): ${step.policy.reason}`);
    if (step.gate)
      lines.push(
        `  gate: ${step.gate.scope} ${step.gate.scopeId}, ${step.gate.requiredApprovals} approver(s)${step.gate.autoApproved ? ', approved by policy' : ''}`,
      );
    if (step.problem !== undefined) lines.push(`  problem: ${step.problem}`);
  }
  return lines;
}
