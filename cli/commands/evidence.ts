import { readFileSync, writeFileSync } from 'node:fs';
import type { Command } from 'commander';
import { checkBundle } from '../../shared/domain/evidence/check.js';
import { sha256Of } from '../../shared/domain/evidence/manifest.js';
import { exportCreatedSchema } from '../../shared/resources/api-schemas.js';
import { type ContextFor, example } from '../context.js';
import { FailedError, UsageError } from '../errors.js';
import { paint } from '../output.js';

const EXAMPLE_RUN = 'run-0b5c6f1e-2a7d-4a57-9a38-3f1c1d2e4b5a';

function readInput(file: string, what: string): Buffer {
  try {
    return readFileSync(file);
  } catch (error) {
    throw new UsageError(
      `cannot read ${what} ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
    );
  }
}

/** `evidence <runId> -o file`, `export --since <iso> -o file` and `verify <bundle> [--key pem] [--replay]`. */
export function registerEvidenceCommands(program: Command, contextFor: ContextFor): void {
  example(
    program
      .command('evidence')
      .description("download a finished run's signed evidence bundle")
      .argument('<runId>', 'the run id')
      .requiredOption('-o, --output <file>', 'where to write the bundle (.tar.gz)'),
    `capstan evidence ${EXAMPLE_RUN} -o evidence.tar.gz && capstan verify evidence.tar.gz`,
  ).action(async function (this: Command, runId: string) {
    const { output: file } = this.opts<{ output: string }>();
    const context = contextFor(this);
    const bytes = await context.client().download(`/runs/${encodeURIComponent(runId)}/evidence`, 'application/gzip');
    writeFileSync(file, bytes);
    const summary = { runId, file, size: bytes.length, sha256: sha256Of(bytes) };
    if (context.output.json) return context.output.data(summary);
    context.output.line(`wrote ${file} (${bytes.length} bytes, sha256 ${summary.sha256})`);
  });

  example(
    program
      .command('export')
      .description('export every run of your tenant in a window as one signed bundle')
      .requiredOption('--since <iso>', 'runs created at or after this time (ISO 8601)')
      .option('--until <iso>', 'runs created at or before this time (default: now)')
      .requiredOption('-o, --output <file>', 'where to write the bundle (.tar.gz)'),
    'capstan export --since 2026-01-01T00:00:00Z -o audit.tar.gz',
  ).action(async function (this: Command) {
    const { since, until, output: file } = this.opts<{ since: string; until?: string; output: string }>();
    const context = contextFor(this);
    const client = context.client();
    const { data } = await client.request('POST', '/exports', exportCreatedSchema, {
      body: { since, ...(until !== undefined && { until }) },
    });
    const bytes = await client.download(`/exports/${encodeURIComponent(data.exportId)}`, 'application/gzip');
    writeFileSync(file, bytes);
    if (context.output.json) return context.output.data({ ...data, file });
    context.output.line(`wrote ${file}: ${data.runs} run(s), ${bytes.length} bytes, sha256 ${data.sha256}`);
  });

  example(
    program
      .command('verify')
      .description('verify a bundle offline: digests, the signature, every chain (exit 1 names the first failure)')
      .argument('<bundle>', 'a bundle from `capstan evidence` or `capstan export`')
      .option('--key <pem>', "verify with this public key instead of the bundle's own public-key.pem")
      .option('--replay', 'also replay every run through the planner and check it decides the same, in order'),
    'capstan verify evidence.tar.gz --key capstan-evidence.pem --replay',
  ).action(function (this: Command, bundle: string) {
    const { key, replay } = this.opts<{ key?: string; replay?: boolean }>();
    const context = contextFor(this);
    const verdict = checkBundle(readInput(bundle, 'the bundle'), {
      ...(key !== undefined && { pinnedKeyPem: readInput(key, 'the key').toString('utf8') }),
      replay: replay === true,
    });
    if (!verdict.ok) throw new FailedError(`${bundle} does not verify: ${verdict.check}: ${verdict.reason}`);
    const summary = {
      bundle,
      format: verdict.manifest.format,
      keyId: verdict.manifest.keyId,
      key: verdict.keySource,
      files: verdict.files,
      runs: verdict.runs,
      ...(verdict.replayed && { replayed: verdict.replayed }),
    };
    if (context.output.json) return context.output.data({ ok: true, ...summary });
    const events = verdict.runs.reduce((n, r) => n + r.events, 0);
    context.output.line(
      `${paint(context.output, 'green', 'verified')} ${bundle}: signature (${verdict.keySource === 'pinned' ? 'pinned key' : "bundle's key"} ${verdict.manifest.keyId}), ${verdict.files} file digests, ${verdict.runs.length} chain(s) of ${events} events` +
        (verdict.replayed ? `, replay of ${verdict.replayed.reduce((n, r) => n + r.decisions, 0)} decisions` : ''),
    );
  });
}
