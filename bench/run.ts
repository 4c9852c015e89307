import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { isolated } from './isolated.js';
import { STORAGE_NOTE } from './storage.js';
import type { Section } from './support.js';

/**
 * `npm run bench [-- <scenario>...]`: runs each scenario on fresh local stacks, each in a process
 * of its own, and writes `bench/report.md` (for people) and `bench/report.json` (for comparing runs).
 */
const SCENARIOS: Readonly<Record<string, { module: string; name: string }>> = {
  runs: { module: './scenarios/runs.js', name: 'runsScenario' },
  workers: { module: './scenarios/workers.js', name: 'workersScenario' },
  approvals: { module: './scenarios/approvals.js', name: 'approvalsScenario' },
  chaos: { module: './scenarios/chaos.js', name: 'chaosScenario' },
  fanout: { module: './scenarios/fanout.js', name: 'fanoutScenario' },
  eventlog: { module: './scenarios/eventlog.js', name: 'eventlogScenario' },
};

const requested = process.argv.slice(2).filter((arg) => !arg.startsWith('-'));
const unknown = requested.filter((name) => !(name in SCENARIOS));
if (unknown.length > 0) {
  console.error(`unknown scenario ${unknown.join(', ')}; choose from ${Object.keys(SCENARIOS).join(', ')}`);
  process.exit(2);
}
const names = requested.length > 0 ? requested : Object.keys(SCENARIOS);

const sections: Section[] = [];
const failed: string[] = [];
for (const name of names) {
  const scenario = SCENARIOS[name];
  if (!scenario) continue;
  const started = Date.now();
  console.log(`[${name}] starting`);
  try {
    const url = new URL(scenario.module.replace(/\.js$/, '.ts'), import.meta.url).href;
    const section = await isolated<Section>(url, scenario.name, [], (line) => console.log(`[${name}] ${line}`));
    sections.push({ ...section, scenario: name, setup: `${section.setup}; ${STORAGE_NOTE}` });
    if (section.failures?.length) {
      failed.push(name);
      console.error(`[${name}] broke: ${section.failures.join('; ')}`);
    }
    console.log(`[${name}] done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  } catch (error) {
    // One scenario failing does not lose the others' figures; the report says what failed.
    failed.push(name);
    console.error(`[${name}] failed: ${(error as Error).message}`);
    sections.push({
      scenario: name,
      title: `${name} (failed)`,
      setup: `the scenario failed: ${(error as Error).message}`,
      measures: [],
      data: {},
    });
  }
}

const dir = import.meta.dirname;
// A run of some scenarios keeps the other scenarios' last figures in the report.
const previous = z
  .object({ sections: z.array(z.object({ title: z.string(), scenario: z.string().optional() }).passthrough()) })
  .safeParse(existsSync(join(dir, 'report.json')) ? JSON.parse(readFileSync(join(dir, 'report.json'), 'utf8')) : {});
if (requested.length > 0 && previous.success) {
  // A scenario run again replaces its section, failed or not. A section that names no scenario is
  // from a report older than that name, and is dropped rather than guessed at.
  const kept = (previous.data.sections as unknown as Section[]).filter(
    (old) => old.scenario !== undefined && !names.includes(old.scenario),
  );
  sections.unshift(...kept);
}

const machine = `${process.platform} ${process.arch}, Node ${process.version}, ${(await import('node:os')).cpus().length} CPUs`;
const markdown = [
  '# Capstan bench report',
  '',
  `${new Date().toISOString()} · ${machine}`,
  '',
  ...sections.flatMap((section) => [
    `## ${section.title}`,
    '',
    section.setup,
    '',
    '| measure | value | notes |',
    '| --- | --- | --- |',
    ...section.measures.map((m) => `| ${m.name} | ${m.value} | ${m.note ?? ''} |`),
    '',
  ]),
].join('\n');

mkdirSync(dir, { recursive: true });
writeFileSync(join(dir, 'report.md'), markdown);
writeFileSync(
  join(dir, 'report.json'),
  `${JSON.stringify({ at: new Date().toISOString(), machine, sections }, null, 2)}\n`,
);
console.log(`\n${markdown}\nwritten to bench/report.md and bench/report.json`);
process.exit(failed.length > 0 ? 1 : 0);
