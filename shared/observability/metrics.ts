import { MetricUnit, Metrics } from '@aws-lambda-powertools/metrics';

/** The CloudWatch namespace of every Capstan metric. */
export const METRIC_NAMESPACE = 'Capstan';

/**
 * Every metric Capstan publishes, under the seeds' names (seed 000 section 6.1, seed 004 section
 * 11.1), with its unit and the only dimensions it may carry. Dimensions are bounded sets
 * (profiles, environments, backends, statuses, reasons, runbooks), never a run, step or worker id:
 * each distinct value is a separate CloudWatch metric and a separate bill line.
 */
export const METRICS = {
  workerAssignments: {
    name: 'worker_assignments_total',
    unit: MetricUnit.Count,
    dimensions: ['sandboxProfile', 'status'],
  },
  runStateTransitions: { name: 'session_state_transitions_total', unit: MetricUnit.Count, dimensions: ['from', 'to'] },
  stepDuration: {
    name: 'execution_step_duration_seconds',
    unit: MetricUnit.Seconds,
    dimensions: ['environment', 'backend'],
  },
  approvalWait: { name: 'approval_wait_duration_seconds', unit: MetricUnit.Seconds, dimensions: ['environment'] },
  sandboxViolations: {
    name: 'sandbox_policy_violations_total',
    unit: MetricUnit.Count,
    dimensions: ['sandboxProfile', 'enforcedBy'],
  },
  credentialFetch: { name: 'credential_fetch_duration_seconds', unit: MetricUnit.Seconds, dimensions: ['source'] },
  websocketSessions: { name: 'websocket_active_sessions', unit: MetricUnit.Count, dimensions: [] },
  queueDepth: { name: 'job_queue_depth', unit: MetricUnit.Count, dimensions: ['sandboxProfile'] },
  leaseExtensions: { name: 'lease_extensions_total', unit: MetricUnit.Count, dimensions: ['sandboxProfile'] },
  retries: { name: 'job_retry_total', unit: MetricUnit.Count, dimensions: ['backend'] },
  failures: { name: 'job_failures_total', unit: MetricUnit.Count, dimensions: ['backend', 'reason'] },
  quotaExceeded: { name: 'quota_exceeded_total', unit: MetricUnit.Count, dimensions: ['tenantId', 'limit'] },
  breakerState: { name: 'circuit_breaker_state', unit: MetricUnit.Count, dimensions: ['runbook'] },
  reconcilerRepairs: { name: 'reconciler_repairs_total', unit: MetricUnit.Count, dimensions: ['repair'] },
  reconcilerFailures: { name: 'reconciler_failures_total', unit: MetricUnit.Count, dimensions: [] },
  stuckRuns: { name: 'stuck_runs', unit: MetricUnit.Count, dimensions: [] },
  approvalSlaBreaches: { name: 'approval_sla_breaches_total', unit: MetricUnit.Count, dimensions: ['environment'] },
} as const;

export type MetricKey = keyof typeof METRICS;
type DimensionsOf<K extends MetricKey> = Record<(typeof METRICS)[K]['dimensions'][number], string>;

type Unit = (typeof MetricUnit)[keyof typeof MetricUnit];

interface Recorded {
  readonly name: string;
  readonly unit: Unit;
  readonly value: number;
  readonly dimensions: Readonly<Record<string, string>>;
}

let serviceName = 'capstan';
let pending: Recorded[] = [];

/** Names the service (the function or the worker) the next flushes are published for. */
export function setMetricsService(name: string): void {
  serviceName = name;
}

/**
 * Records one value of a metric, with exactly its declared dimensions; published at the next
 * {@link flushMetrics} (once per Lambda invocation, after each worker step).
 */
export function recordMetric<K extends MetricKey>(key: K, value: number, dimensions: DimensionsOf<K>): void {
  const spec = METRICS[key];
  const bounded: Record<string, string> = {};
  for (const dimension of spec.dimensions)
    bounded[dimension] = (dimensions as Record<string, string>)[dimension] ?? 'none';
  pending.push({ name: spec.name, unit: spec.unit, value, dimensions: bounded });
}

/**
 * Publishes what was recorded as CloudWatch EMF, one document per dimension set (EMF gives every
 * metric in a document the same dimensions), and forgets it.
 */
export function flushMetrics(): void {
  const batch = pending;
  pending = [];
  const groups = new Map<string, Recorded[]>();
  for (const item of batch) {
    const key = JSON.stringify(Object.entries(item.dimensions).sort(([a], [b]) => a.localeCompare(b)));
    groups.set(key, [...(groups.get(key) ?? []), item]);
  }
  for (const items of groups.values()) {
    const first = items[0];
    if (!first) continue;
    const metrics = new Metrics({ namespace: METRIC_NAMESPACE, serviceName });
    if (Object.keys(first.dimensions).length > 0) metrics.addDimensions({ ...first.dimensions });
    for (const item of items) metrics.addMetric(item.name, item.unit, item.value);
    metrics.publishStoredMetrics();
  }
}

/** Circuit breaker states as the metric's values: a graph reads 0 closed, 1 half-open, 2 open. */
export const BREAKER_STATE_VALUES = { closed: 0, half_open: 1, open: 2 } as const;
export type BreakerStateName = keyof typeof BREAKER_STATE_VALUES;

/** Publishes a runbook's circuit breaker state (call on every transition). */
export function recordBreakerState(runbook: string, state: BreakerStateName): void {
  recordMetric('breakerState', BREAKER_STATE_VALUES[state], { runbook });
}

/**
 * Publishes what a reconciliation did: each kind of repair it made (`reconciler_repairs_total` by
 * `repair`), and how many runs it found stuck (`stuck_runs`, a count at that moment, so alarmable).
 */
export function recordReconcileSummary<S extends Record<keyof S, number> & { readonly stuckRuns: number }>(
  summary: S,
): void {
  for (const [repair, count] of Object.entries<number>(summary)) {
    if (repair !== 'stuckRuns' && count > 0) recordMetric('reconcilerRepairs', count, { repair });
  }
  recordMetric('stuckRuns', summary.stuckRuns, {});
}
