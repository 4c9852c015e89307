import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  flushMetrics,
  METRIC_NAMESPACE,
  METRICS,
  type MetricKey,
  recordBreakerState,
  recordMetric,
} from '../../../shared/observability/metrics.js';

interface Emf {
  _aws: {
    CloudWatchMetrics: Array<{
      Namespace: string;
      Dimensions: string[][];
      Metrics: Array<{ Name: string; Unit: string }>;
    }>;
  };
  [key: string]: unknown;
}

let lines: string[];

beforeEach(() => {
  lines = [];
  vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    lines.push(String(chunk));
    return true;
  });
});

afterEach(() => {
  vi.restoreAllMocks();
});

const emitted = (): Emf[] =>
  lines
    .flatMap((line) => line.split('\n').filter((l) => l.includes('CloudWatchMetrics')))
    .map((l) => JSON.parse(l) as Emf);

const sampleDimensions = (key: MetricKey): Record<string, string> =>
  Object.fromEntries(METRICS[key].dimensions.map((d) => [d, `${d}-value`]));

describe('metrics', () => {
  it.each(Object.keys(METRICS) as MetricKey[])('publishes %s as EMF with its name, unit and dimensions', (key) => {
    const spec = METRICS[key];
    recordMetric(key, 3, sampleDimensions(key) as never);
    flushMetrics();
    const [document] = emitted();
    expect(document).toBeDefined();
    const directive = document?._aws.CloudWatchMetrics[0];
    expect(directive?.Namespace).toBe(METRIC_NAMESPACE);
    expect(directive?.Metrics).toEqual([{ Name: spec.name, Unit: spec.unit }]);
    expect(document?.[spec.name]).toBe(3);
    for (const dimension of spec.dimensions) {
      expect(directive?.Dimensions[0]).toContain(dimension);
      expect(document?.[dimension]).toBe(`${dimension}-value`);
    }
  });

  it('never makes a run, step or worker id a dimension', () => {
    const all = Object.values(METRICS).flatMap((spec) => [...spec.dimensions] as string[]);
    expect(all).not.toContain('runId');
    expect(all).not.toContain('stepId');
    expect(all).not.toContain('workerId');
    expect(all).not.toContain('executionId');
  });

  it('drops a dimension the metric does not declare', () => {
    recordMetric('retries', 1, { backend: 'test', runId: 'run-1' } as never);
    flushMetrics();
    const [document] = emitted();
    expect(document?.runId).toBeUndefined();
    expect(document?._aws.CloudWatchMetrics[0]?.Dimensions[0]).not.toContain('runId');
  });

  it('publishes one document per dimension set at the flush, and nothing before it', () => {
    recordMetric('stepDuration', 1.5, { environment: 'dev', backend: 'test' });
    recordMetric('stepDuration', 2.5, { environment: 'dev', backend: 'test' });
    recordMetric('stepDuration', 0.5, { environment: 'dev', backend: 'http' });
    expect(emitted()).toHaveLength(0);
    flushMetrics();
    const documents = emitted();
    expect(documents).toHaveLength(2);
    expect(documents.find((d) => d.backend === 'test')?.execution_step_duration_seconds).toEqual([1.5, 2.5]);
  });

  it('publishes a breaker state as 0 closed, 1 half-open, 2 open, by runbook', () => {
    recordBreakerState('restart-web', 'open');
    recordBreakerState('rotate-keys', 'half_open');
    flushMetrics();
    const byRunbook = Object.fromEntries(emitted().map((d) => [d.runbook, d.circuit_breaker_state]));
    expect(byRunbook).toEqual({ 'restart-web': 2, 'rotate-keys': 1 });
    expect(emitted()[0]?._aws.CloudWatchMetrics[0]?.Metrics[0]).toEqual({
      Name: 'circuit_breaker_state',
      Unit: 'Count',
    });
  });
});
