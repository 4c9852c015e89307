import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../infra/app.js';
import type { StatelessStack } from '../../infra/stateless-stack.js';
import { METRICS } from '../../shared/observability/metrics.js';

const CONTEXT = {
  'capstan:jwtIssuer': 'https://auth.example.com/',
  'capstan:jwksUrl': 'https://auth.example.com/.well-known/jwks.json',
  'aws:cdk:bundling-stacks': [],
};

let stack: StatelessStack;
let template: Template;
let dashboardBody: string;

type Resource = { Properties: Record<string, unknown> };
const resources = (type: string) => Object.values(template.findResources(type)) as Resource[];

beforeAll(() => {
  stack = buildApp(new App({ context: CONTEXT })).stateless;
  template = Template.fromStack(stack);
  const [dashboard] = resources('AWS::CloudWatch::Dashboard');
  dashboardBody = JSON.stringify(stack.resolve(dashboard?.Properties.DashboardBody));
});

/** Every alarm, as the text of its metric (name, or the expressions of its metric math) and its threshold. */
function alarms(): Array<{ metric: string; threshold: unknown; actions: unknown }> {
  return resources('AWS::CloudWatch::Alarm').map(({ Properties: p }) => ({
    metric: JSON.stringify([p.MetricName ?? null, p.Metrics ?? null]),
    threshold: p.Threshold,
    actions: p.AlarmActions,
  }));
}

describe('the operations dashboard', () => {
  it.each([
    ['assignment rate', METRICS.workerAssignments.name],
    ['runs by state', METRICS.runStateTransitions.name],
    ['step duration', METRICS.stepDuration.name],
    ['approval wait', METRICS.approvalWait.name],
    ['violations', METRICS.sandboxViolations.name],
    ['reconciler repairs', METRICS.reconcilerRepairs.name],
    ['DLQ depth', 'ApproximateNumberOfMessagesVisible'],
    ['API 5xx', '5XXError'],
    ['API latency', 'Latency'],
  ])('charts %s (%s)', (_what, metric) => {
    expect(dashboardBody).toContain(metric);
  });

  it('charts step duration at p50 and p99', () => {
    expect(dashboardBody).toMatch(/execution_step_duration_seconds[^']*', 'p50'/);
    expect(dashboardBody).toMatch(/execution_step_duration_seconds[^']*', 'p99'/);
  });
});

describe('the alarms', () => {
  it.each([
    ['stuck runs', METRICS.stuckRuns.name, 1],
    ['reconciler failures', METRICS.reconcilerFailures.name, 1],
    ['an open breaker', METRICS.breakerState.name, 2],
    ['approval SLA breaches', METRICS.approvalSlaBreaches.name, 1],
  ])('alarms on %s (%s >= %d) to the alarm topic', (_what, metric, threshold) => {
    const found = alarms().filter((a) => a.metric.includes(`\\"${metric}\\"`));
    expect(found).toHaveLength(1);
    expect(found[0]?.threshold).toBe(threshold);
    expect(JSON.stringify(found[0]?.actions)).toContain('OperationsAlarms');
  });

  it('alarms on the dead letters of every profile queue', () => {
    const dlq = alarms().filter((a) => a.metric.includes('ApproximateNumberOfMessagesVisible'));
    expect(dlq.length).toBeGreaterThanOrEqual(stack.workers.size);
  });
});

describe('tracing', () => {
  it('turns active X-Ray tracing on for every Capstan function', () => {
    expect(stack.functions.size).toBeGreaterThan(10);
    for (const [name, fn] of stack.functions) {
      const id = stack.getLogicalId(fn.node.defaultChild as never);
      const tracing = (template.toJSON().Resources[id] as Resource).Properties.TracingConfig;
      expect({ name, tracing }).toEqual({ name, tracing: { Mode: 'Active' } });
    }
  });

  it('runs the X-Ray daemon beside every worker, which sends its spans to it', () => {
    const tasks = resources('AWS::ECS::TaskDefinition');
    expect(tasks).toHaveLength(stack.workers.size);
    for (const task of tasks) {
      const containers = task.Properties.ContainerDefinitions as Array<{
        Name: string;
        Environment?: Array<{ Name: string; Value: unknown }>;
        PortMappings?: Array<{ ContainerPort: number; Protocol: string }>;
      }>;
      const daemon = containers.find((c) => c.Name === 'xray-daemon');
      expect(daemon?.PortMappings).toEqual([expect.objectContaining({ ContainerPort: 2000, Protocol: 'udp' })]);
      const worker = containers.find((c) => c.Name === 'worker');
      expect(worker?.Environment).toContainEqual({ Name: 'AWS_XRAY_DAEMON_ADDRESS', Value: '127.0.0.1:2000' });
    }
  });
});
