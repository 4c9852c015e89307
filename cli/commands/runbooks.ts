import { readFileSync } from 'node:fs';
import { extname } from 'node:path';
import type { Command } from 'commander';
import { ValidationError } from '../../shared/domain/errors.js';
import { runbookDigest } from '../../shared/domain/runbook.js';
import { parseRunbookSource, type RunbookFormat } from '../../shared/domain/runbook-source.js';
import { registeredRunbookSchema, runbookPageSchema } from '../../shared/resources/api-schemas.js';
import { type ContextFor, example } from '../context.js';
import { ApiError, FailedError, UsageError } from '../errors.js';
import { issueLines } from '../issues.js';
import { table } from '../output.js';

/** A runbook file and its format: `.json` is JSON, anything else YAML. */
export function readRunbookFile(file: string): { source: string; format: RunbookFormat } {
  let source: string;
  try {
    source = readFileSync(file, 'utf8');
  } catch (error) {
    throw new UsageError(`cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  return { source, format: extname(file).toLowerCase() === '.json' ? 'json' : 'yaml' };
}

export function registerRunbookCommands(program: Command, contextFor: ContextFor): void {
  const runbooks = example(
    program.command('runbooks').description('validate, push and list runbooks'),
    'capstan runbooks push examples/runbooks/hello.yaml',
  );

  example(
    runbooks
      .command('validate')
      .description('check a runbook file offline, with the API’s checks; exit 1 when it is not valid')
      .argument('<file>', 'a YAML or JSON runbook'),
    'capstan runbooks validate examples/runbooks/hello.yaml',
  ).action(function (this: Command, file: string) {
    const { output } = contextFor(this);
    const { source, format } = readRunbookFile(file);
    try {
      const runbook = parseRunbookSource(source, format);
      const steps = runbook.phases.reduce((n, phase) => n + phase.steps.length, 0);
      const digest = runbookDigest(runbook);
      if (output.json) output.data({ valid: true, file, id: runbook.name, steps, digest });
      else
        output.line(`${file}: valid (runbook ${runbook.name}, ${steps} step(s) in ${runbook.phases.length} phase(s))`);
    } catch (error) {
      if (!(error instanceof ValidationError)) throw error;
      if (output.json) output.data({ valid: false, file, issues: error.issues });
      else for (const line of issueLines(error.issues, file)) output.error(line);
      throw new FailedError(
        `${file} is not a valid runbook (${error.issues.length} problem${error.issues.length === 1 ? '' : 's'})`,
        'fix the lines above and validate again',
      );
    }
  });

  example(
    runbooks
      .command('push')
      .description('register a runbook version (the same content twice gives the same version)')
      .argument('<file>', 'a YAML or JSON runbook'),
    'capstan runbooks push examples/runbooks/hello.yaml',
  ).action(async function (this: Command, file: string) {
    const context = contextFor(this);
    const { source, format } = readRunbookFile(file);
    const { data, raw, status } = await context
      .client()
      .request('POST', '/runbooks', registeredRunbookSchema, {
        body: format === 'json' ? (JSON.parse(source) as unknown) : source,
        yaml: format === 'yaml',
      })
      .catch((error: unknown) => {
        // The API's issues carry lines of this file: print them as `validate` does.
        if (!(error instanceof ApiError) || context.output.json || issueLines(error.details).length === 0) throw error;
        for (const line of issueLines(error.details, file)) context.output.error(line);
        throw new ApiError(error.code, error.message, error.status, 'fix the lines above and push again');
      });
    if (context.output.json) return context.output.data(raw);
    context.output.line(
      `runbook ${data.id} version ${data.version} ${status === 201 ? 'registered' : 'unchanged (same content)'}  ${data.digest.slice(0, 12)}`,
    );
  });

  example(
    runbooks.command('list').description("the tenant's runbooks and their latest versions"),
    'capstan runbooks list',
    'capstan runbooks list --json',
  ).action(async function (this: Command) {
    const context = contextFor(this);
    const items: Array<Record<string, unknown>> = [];
    const rows: string[][] = [];
    let cursor: string | undefined;
    do {
      const { data, raw } = await context
        .client()
        .request('GET', '/runbooks', runbookPageSchema, { query: { limit: 100, cursor } });
      items.push(...(((raw as { items?: unknown[] }).items ?? []) as Array<Record<string, unknown>>));
      for (const r of data.items) rows.push([r.runbookId, String(r.latestVersion), r.updatedAt, r.description ?? '']);
      cursor = data.nextCursor;
    } while (cursor);
    if (context.output.json) return context.output.data({ runbooks: items });
    context.output.line(
      rows.length === 0
        ? 'no runbooks yet: capstan runbooks push <file>'
        : table(context.output, ['id', 'version', 'updated', 'description'], rows),
    );
  });
}
