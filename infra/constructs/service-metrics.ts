import { Duration } from 'aws-cdk-lib';
import {
  Alarm,
  ComparisonOperator,
  type Dashboard,
  GraphWidget,
  type IMetric,
  MathExpression,
  SearchExpression,
  TreatMissingData,
} from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import type { ITopic } from 'aws-cdk-lib/aws-sns';
import { Construct } from 'constructs';
import { METRIC_NAMESPACE, METRICS, type MetricKey } from '../../shared/observability/metrics.js';

export interface ServiceMetricsProps {
  /** The dashboard the widgets are added to, below what it already shows. */
  readonly dashboard: Dashboard;
  /** Where every alarm notifies. */
  readonly alarmTopic: ITopic;
  /** @default Duration.minutes(5) */
  readonly period?: Duration;
}

type Aggregate = 'SUM' | 'MAX' | 'AVG';

/**
 * Capstan's own metrics (`shared/observability/metrics.ts`) on the operations dashboard, and the
 * alarms on them. Metrics are published as EMF with a `service` dimension beside their own, so
 * widgets and alarms read them through Metrics Insights queries and searches by metric name: they
 * aggregate over every function and dimension value, and need no list of runbooks or profiles.
 */
export class ServiceMetrics extends Construct {
  /** The alarms by metric key, for the tests and for anyone adding actions. */
  public readonly alarms: ReadonlyMap<MetricKey, Alarm>;
  private readonly period: Duration;

  constructor(scope: Construct, id: string, props: ServiceMetricsProps) {
    super(scope, id);
    this.period = props.period ?? Duration.minutes(5);
    if (this.period.toSeconds() < 60) throw new Error('ServiceMetrics period must be at least one minute');

    props.dashboard.addWidgets(
      this.graph('Worker assignments', [this.query('workerAssignments', 'SUM', 'sandboxProfile')]),
      this.graph('Runs by state (transitions into)', [this.query('runStateTransitions', 'SUM', 'to')]),
      this.graph('Step duration p50 / p99 (s)', [
        this.search('stepDuration', 'p50'),
        this.search('stepDuration', 'p99'),
      ]),
    );
    props.dashboard.addWidgets(
      this.graph('Approval wait (s)', [this.search('approvalWait', 'p50'), this.search('approvalWait', 'Maximum')]),
      this.graph('Sandbox policy violations', [this.query('sandboxViolations', 'SUM', 'enforcedBy')]),
      this.graph('Reconciler repairs', [this.query('reconcilerRepairs', 'SUM', 'repair')]),
    );
    props.dashboard.addWidgets(
      this.graph('Stuck runs and breakers', [this.query('stuckRuns', 'MAX'), this.query('breakerState', 'MAX')]),
      this.graph('Approval SLA breaches', [this.query('approvalSlaBreaches', 'SUM')]),
      this.graph('Failures and retries', [this.query('failures', 'SUM', 'reason'), this.query('retries', 'SUM')]),
    );

    const alarm = (key: MetricKey, aggregate: Aggregate, threshold: number, description: string) => {
      const made = new Alarm(this, `Alarm-${METRICS[key].name}`, {
        metric: this.query(key, aggregate),
        threshold,
        evaluationPeriods: 1,
        comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: TreatMissingData.NOT_BREACHING,
        alarmDescription: description,
      });
      made.addAlarmAction(new SnsAction(props.alarmTopic));
      return [key, made] as const;
    };
    this.alarms = new Map([
      alarm('stuckRuns', 'MAX', 1, 'A run has had no event for longer than its longest step timeout'),
      alarm('reconcilerFailures', 'SUM', 1, 'The reconciler failed a sweep'),
      alarm('breakerState', 'MAX', 2, 'A runbook circuit breaker is open'),
      alarm('approvalSlaBreaches', 'SUM', 1, 'An approval passed its SLA and was escalated'),
    ]);
  }

  /** One value per period over every series of the metric, or one line per value of `groupBy`. */
  private query(key: MetricKey, aggregate: Aggregate, groupBy?: string): IMetric {
    const { name } = METRICS[key];
    return new MathExpression({
      expression:
        `SELECT ${aggregate}("${name}") FROM "${METRIC_NAMESPACE}"` + (groupBy ? ` GROUP BY "${groupBy}"` : ''),
      label: name,
      period: this.period,
    });
  }

  /** A statistic (percentiles included, which Metrics Insights lacks) of every series of the metric. */
  private search(key: MetricKey, statistic: string): IMetric {
    const { name } = METRICS[key];
    return new SearchExpression({
      expression: `SEARCH('Namespace="${METRIC_NAMESPACE}" MetricName="${name}"', '${statistic}', ${this.period.toSeconds()})`,
      label: `${name} ${statistic}`,
      period: this.period,
    });
  }

  private graph(title: string, left: IMetric[]): GraphWidget {
    return new GraphWidget({ title, left, width: 8 });
  }
}
