import { Duration } from 'aws-cdk-lib';
import type { RestApi } from 'aws-cdk-lib/aws-apigateway';
import {
  Alarm,
  ComparisonOperator,
  Dashboard,
  GraphWidget,
  type IMetric,
  TreatMissingData,
} from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import type { IKey } from 'aws-cdk-lib/aws-kms';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import type { IQueue } from 'aws-cdk-lib/aws-sqs';
import { Topic } from 'aws-cdk-lib/aws-sns';
import { EmailSubscription } from 'aws-cdk-lib/aws-sns-subscriptions';
import type { IStateMachine } from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import type { SandboxProfileName } from '../../shared/domain/sandbox-profiles.js';
import type { ProfileQueue } from './profile-queue.js';

export interface OperationsProps {
  /** Name of the dashboard. */
  readonly dashboardName: string;
  /** Encrypts the alarm topic. */
  readonly key: IKey;
  /** Where alarms send email; no subscription when empty. @default '' */
  readonly alarmEmail?: string;
  readonly stateMachine: IStateMachine;
  readonly restApi: RestApi;
  readonly queues: ReadonlyMap<SandboxProfileName, ProfileQueue>;
  /** The event-stream batches the broadcaster gave up on. */
  readonly broadcastFailures: IQueue;
  /** Every function, charted by its errors. */
  readonly functions: ReadonlyMap<string, IFunction>;
  /** Functions whose every error raises an alarm, by their name in `functions`. */
  readonly alarmOnErrorsOf: readonly string[];
}

/** Alarms on dead letters, failed runs, 5xx answers and failing core functions; and the operations dashboard. */
export class Operations extends Construct {
  /** Where every alarm notifies. */
  public readonly alarmTopic: Topic;
  public readonly dashboard: Dashboard;

  constructor(scope: Construct, id: string, props: OperationsProps) {
    super(scope, id);
    const missing = props.alarmOnErrorsOf.filter((name) => !props.functions.has(name));
    if (missing.length > 0) throw new Error(`Operations cannot alarm on unknown functions: ${missing.join(', ')}`);
    this.alarmTopic = new Topic(this, 'Alarms', {
      masterKey: props.key,
      enforceSSL: true,
      displayName: 'Capstan alarms',
    });
    if (props.alarmEmail) this.alarmTopic.addSubscription(new EmailSubscription(props.alarmEmail));

    for (const [profileName, pq] of props.queues) {
      this.alarm(
        `DlqAlarm-${profileName}`,
        pq.deadLetterQueue.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(1) }),
        `Step commands of ${profileName} reached the DLQ`,
      );
    }
    this.alarm(
      'FailedRunsAlarm',
      props.stateMachine.metricFailed({ period: Duration.minutes(5) }),
      'A run interpreter execution failed',
    );
    this.alarm(
      'BroadcastFailuresAlarm',
      props.broadcastFailures.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(1) }),
      'Events could not be broadcast',
    );
    this.alarm(
      'Api5xxAlarm',
      props.restApi.metricServerError({ period: Duration.minutes(5) }),
      'The REST API answered 5xx',
    );
    for (const name of props.alarmOnErrorsOf) {
      const f = props.functions.get(name);
      if (f)
        this.alarm(`Errors-${name}`, f.metricErrors({ period: Duration.minutes(5) }), `The ${name} function failed`);
    }

    const queues = [...props.queues.values()];
    this.dashboard = new Dashboard(this, 'Dashboard', {
      dashboardName: props.dashboardName,
      widgets: [
        [
          new GraphWidget({
            title: 'Runs',
            left: [
              props.stateMachine.metricStarted(),
              props.stateMachine.metricSucceeded(),
              props.stateMachine.metricFailed(),
            ],
          }),
          new GraphWidget({
            title: 'API',
            left: [props.restApi.metricCount(), props.restApi.metricClientError(), props.restApi.metricServerError()],
            right: [props.restApi.metricLatency()],
          }),
        ],
        [
          new GraphWidget({
            title: 'Queue depth',
            left: queues.flatMap((pq) => pq.stepQueues.map((q) => q.metricApproximateNumberOfMessagesVisible())),
          }),
          new GraphWidget({
            title: 'Dead letters',
            left: queues.map((pq) => pq.deadLetterQueue.metricApproximateNumberOfMessagesVisible()),
          }),
        ],
        [
          new GraphWidget({
            title: 'Function errors',
            left: [...props.functions.values()].map((f) => f.metricErrors()),
          }),
        ],
      ],
    });
  }

  private alarm(id: string, metric: IMetric, description: string): Alarm {
    const made = new Alarm(this, id, {
      metric,
      threshold: 0,
      evaluationPeriods: 1,
      comparisonOperator: ComparisonOperator.GREATER_THAN_THRESHOLD,
      treatMissingData: TreatMissingData.NOT_BREACHING,
      alarmDescription: description,
    });
    made.addAlarmAction(new SnsAction(this.alarmTopic));
    return made;
  }
}
