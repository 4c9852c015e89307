/** What a run waiting on others does next, from its dependencies' statuses. */
export type DependencyVerdict =
  | { readonly kind: 'wait'; readonly waitingOn: readonly string[] }
  | { readonly kind: 'ready' }
  | { readonly kind: 'fail'; readonly failed: string; readonly status: string };

const ENDED_BADLY = new Set(['failed', 'cancelled']);

/** Ready when every dependency succeeded; failed as soon as one ended otherwise. */
export function dependencyVerdict(statuses: ReadonlyMap<string, string>): DependencyVerdict {
  for (const [runId, status] of statuses) if (ENDED_BADLY.has(status)) return { kind: 'fail', failed: runId, status };
  const waitingOn = [...statuses].filter(([, status]) => status !== 'succeeded').map(([runId]) => runId);
  return waitingOn.length === 0 ? { kind: 'ready' } : { kind: 'wait', waitingOn };
}

/**
 * The first cycle in a dependency graph (run id to the runs it depends on), as a path, or
 * undefined. A new run can only name runs that exist, so this guards against stored data.
 */
export function findCycle(graph: ReadonlyMap<string, readonly string[]>): string[] | undefined {
  const state = new Map<string, 'visiting' | 'done'>();
  const path: string[] = [];
  const visit = (node: string): string[] | undefined => {
    if (state.get(node) === 'done') return undefined;
    if (state.get(node) === 'visiting') return [...path.slice(path.indexOf(node)), node];
    state.set(node, 'visiting');
    path.push(node);
    for (const next of graph.get(node) ?? []) {
      const cycle = visit(next);
      if (cycle) return cycle;
    }
    path.pop();
    state.set(node, 'done');
    return undefined;
  };
  for (const node of graph.keys()) {
    const cycle = visit(node);
    if (cycle) return cycle;
  }
  return undefined;
}
