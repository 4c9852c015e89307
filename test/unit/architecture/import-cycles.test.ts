import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '../../..');

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** Relative imports of each file under `shared/`, type-only ones included (they still couple the modules). */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of sources(join(root, 'shared'))) {
    const text = readFileSync(file, 'utf8');
    const targets = [...text.matchAll(/from '(\.{1,2}\/[^']+)\.js'/g)].flatMap((m) =>
      m[1] === undefined ? [] : [resolve(dirname(file), `${m[1]}.ts`)],
    );
    graph.set(file, targets);
  }
  return graph;
}

/** The first import cycle found, as a list of files relative to the repository, or undefined. */
function findCycle(graph: Map<string, string[]>): string[] | undefined {
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (file: string): string[] | undefined => {
    if (state.get(file) === 'done') return undefined;
    if (state.get(file) === 'open') return [...stack.slice(stack.indexOf(file)), file];
    state.set(file, 'open');
    stack.push(file);
    for (const next of graph.get(file) ?? []) {
      const cycle = visit(next);
      if (cycle) return cycle;
    }
    stack.pop();
    state.set(file, 'done');
    return undefined;
  };
  for (const file of graph.keys()) {
    const cycle = visit(file);
    if (cycle) return cycle.map((f) => relative(root, f));
  }
  return undefined;
}

describe('the import graph of shared/', () => {
  it('has no import cycle', () => {
    const cycle = findCycle(importGraph());
    expect(cycle, cycle?.join(' -> ')).toBeUndefined();
  });

  it('finds a cycle when there is one', () => {
    const graph = new Map([
      ['/a.ts', ['/b.ts']],
      ['/b.ts', ['/c.ts']],
      ['/c.ts', ['/a.ts']],
    ]);
    expect(findCycle(graph)).toHaveLength(4);
  });
});
