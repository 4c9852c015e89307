/**
 * Weighted round-robin over tenants with backlog (seed 001 section 3.4): each round takes up to
 * `weight` runs from each tenant in turn, so one tenant's flood never waits behind, nor delays,
 * another's runs. Each backlog is already in admission order (priority, then age).
 *
 * Each round starts after `servedLast` (the tenant a previous pass admitted last), so when a pass
 * has room for only a few runs (a full queue freeing one place at a time) the same tenant does not
 * come first every time by the accident of its name.
 */
export function weightedRoundRobin<T>(
  backlogs: ReadonlyMap<string, readonly T[]>,
  weightOf: (tenantId: string) => number = () => 1,
  servedLast?: string,
): T[] {
  const sorted = [...backlogs.keys()].sort();
  const after = servedLast === undefined ? 0 : sorted.findIndex((t) => t > servedLast);
  const tenants = after <= 0 ? sorted : [...sorted.slice(after), ...sorted.slice(0, after)];
  const cursors = new Map(tenants.map((t) => [t, 0]));
  const order: T[] = [];
  for (let progressed = true; progressed;) {
    progressed = false;
    for (const tenant of tenants) {
      const list = backlogs.get(tenant) ?? [];
      const from = cursors.get(tenant) ?? 0;
      const take = list.slice(from, from + Math.max(1, Math.floor(weightOf(tenant))));
      if (take.length === 0) continue;
      order.push(...take);
      cursors.set(tenant, from + take.length);
      progressed = true;
    }
  }
  return order;
}
