import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { ValidationError } from '../domain/errors.js';
import { parseRoutes, type RoutesDocument, unknownRunbooks } from '../domain/intake/routing.js';

/**
 * The routing document as a deployment gives it: a file (`capstan:routesFile` at synth,
 * `CAPSTAN_ROUTES` at local start), or the JSON itself. The functions receive it normalised, as
 * JSON text in `CAPSTAN_ROUTES`.
 */
export function readRoutes(fileOrJson: string): RoutesDocument {
  const text = fileOrJson.trimStart().startsWith('{') ? fileOrJson : readFileSync(fileOrJson, 'utf8');
  try {
    return parseRoutes(text);
  } catch (error) {
    if (!(error instanceof ValidationError)) throw error;
    const where = fileOrJson.trimStart().startsWith('{') ? 'the routing document' : fileOrJson;
    throw new Error(`${where}: ${error.message}: ${error.issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`);
  }
}

/** The runbook ids (`name`) of the runbook files in a directory, e.g. `examples/runbooks`. */
export function runbookNamesIn(dir: string): Set<string> {
  const names = new Set<string>();
  if (!existsSync(dir)) return names;
  for (const file of readdirSync(dir)) {
    if (!['.yaml', '.yml', '.json'].includes(extname(file))) continue;
    const doc: unknown = parseYaml(readFileSync(join(dir, file), 'utf8'));
    if (doc !== null && typeof doc === 'object' && 'name' in doc && typeof doc.name === 'string') names.add(doc.name);
  }
  return names;
}

/** Fails with every rule whose runbook is not known for its tenant (or that has no tenant at all). */
export function checkRoutes(
  doc: RoutesDocument,
  known: (tenantId: string, runbookId: string) => boolean,
  defaultTenant: string | undefined,
): void {
  const problems = unknownRunbooks(doc, known, defaultTenant);
  if (problems.length === 0) return;
  throw new Error(
    `the routing document names unknown runbooks: ${problems
      .map((p) =>
        p.tenant === undefined
          ? `rule '${p.ruleId}' names no tenant and the deployment has no platform tenant`
          : `rule '${p.ruleId}' -> '${p.runbook}' (tenant ${p.tenant})`,
      )
      .join('; ')}`,
  );
}
