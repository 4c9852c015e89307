import { ArnFormat, Duration, Names, Stack } from 'aws-cdk-lib';
import { CfnScalingPolicy } from 'aws-cdk-lib/aws-applicationautoscaling';
import { type IVpc, Peer, Port, SecurityGroup, SubnetType } from 'aws-cdk-lib/aws-ec2';
import {
  Capability,
  ContainerImage,
  CpuArchitecture,
  FargateService,
  FargateTaskDefinition,
  type ICluster,
  LinuxParameters,
  LogDrivers,
  OperatingSystemFamily,
  Protocol,
} from 'aws-cdk-lib/aws-ecs';
import { Grant } from 'aws-cdk-lib/aws-iam';
import type { IKey } from 'aws-cdk-lib/aws-kms';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { IQueue } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import type { ProfileCapacity } from '../../shared/config.js';
import type { SandboxProfile } from '../../shared/domain/sandbox-profiles.js';

export interface WorkerServiceProps {
  readonly profile: SandboxProfile;
  readonly cluster: ICluster;
  readonly vpc: IVpc;
  readonly image: ContainerImage;
  /** Environment of the worker process (resource names, never secrets). */
  readonly environment: Readonly<Record<string, string>>;
  /** Secrets this profile's workers may read: `<secretPrefix>/<profile>/*`. */
  readonly secretPrefix: string;
  readonly logKey: IKey;
  /** The profile's step and priority queues: the service scales on their backlog per task. */
  readonly queues: readonly IQueue[];
  /** Scaling bounds and target (`capacityOf` fills the defaults). */
  readonly capacity: ProfileCapacity;
  /**
   * The X-Ray daemon sidecar the worker sends its spans to over UDP (docs/observability.md).
   * @default ContainerImage.fromRegistry(XRAY_DAEMON_IMAGE)
   */
  readonly xrayDaemonImage?: ContainerImage;
}

/** The AWS-published X-Ray daemon, pinned to its major version. */
export const XRAY_DAEMON_IMAGE = 'public.ecr.aws/xray/aws-xray-daemon:3.x';
/** Where the worker finds the daemon: containers of a Fargate task share localhost. */
const XRAY_DAEMON_ADDRESS = '127.0.0.1:2000';

/**
 * One sandbox profile's workers: a hardened Fargate task definition (non-root, all Linux
 * capabilities dropped, read-only root filesystem where the profile says so, no public IP,
 * egress per profile) and the service that keeps them running.
 */
export class WorkerService extends Construct {
  public readonly taskDefinition: FargateTaskDefinition;
  public readonly service: FargateService;
  public readonly securityGroup: SecurityGroup;

  constructor(scope: Construct, id: string, props: WorkerServiceProps) {
    super(scope, id);
    const { profile, capacity } = props;
    if (capacity.minWorkers > capacity.maxWorkers)
      throw new Error(
        `profile ${profile.name}: minWorkers ${capacity.minWorkers} exceeds maxWorkers ${capacity.maxWorkers}`,
      );
    if (profile.stopTimeoutSeconds < 2 || profile.stopTimeoutSeconds > 120) {
      throw new Error(
        `profile ${profile.name}: Fargate stop timeout must be 2-120 s, got ${profile.stopTimeoutSeconds}`,
      );
    }

    this.taskDefinition = new FargateTaskDefinition(this, 'Task', {
      cpu: profile.container.cpu,
      memoryLimitMiB: profile.container.memoryMiB,
      runtimePlatform: {
        cpuArchitecture: CpuArchitecture.ARM64,
        operatingSystemFamily: OperatingSystemFamily.LINUX,
      },
    });
    const logGroup = new LogGroup(this, 'Logs', { retention: RetentionDays.ONE_MONTH, encryptionKey: props.logKey });
    const linuxParameters = new LinuxParameters(this, 'Linux', { initProcessEnabled: true });
    linuxParameters.dropCapabilities(Capability.ALL);
    const container = this.taskDefinition.addContainer('worker', {
      image: props.image,
      user: '1000:1000',
      readonlyRootFilesystem: profile.container.readOnlyRootFilesystem,
      linuxParameters,
      stopTimeout: Duration.seconds(profile.stopTimeoutSeconds),
      environment: {
        ...props.environment,
        CAPSTAN_SANDBOX_PROFILE: profile.name,
        AWS_XRAY_DAEMON_ADDRESS: XRAY_DAEMON_ADDRESS,
      },
      logging: LogDrivers.awsLogs({ streamPrefix: profile.name, logGroup }),
    });
    // The daemon batches the worker's spans to X-Ray; it holds no step data and needs no privilege.
    const daemonLinux = new LinuxParameters(this, 'DaemonLinux', { initProcessEnabled: false });
    daemonLinux.dropCapabilities(Capability.ALL);
    this.taskDefinition.addContainer('xray-daemon', {
      image: props.xrayDaemonImage ?? ContainerImage.fromRegistry(XRAY_DAEMON_IMAGE),
      essential: false,
      linuxParameters: daemonLinux,
      cpu: 32,
      memoryReservationMiB: 64,
      portMappings: [{ containerPort: 2000, protocol: Protocol.UDP }],
      logging: LogDrivers.awsLogs({ streamPrefix: `${profile.name}-xray`, logGroup }),
    });
    // Scripts get a temporary working directory even when the root filesystem is read-only.
    this.taskDefinition.addVolume({ name: 'scratch' });
    container.addMountPoints({ containerPath: '/tmp', sourceVolume: 'scratch', readOnly: false });

    this.securityGroup = new SecurityGroup(this, 'Egress', {
      vpc: props.vpc,
      allowAllOutbound: false,
      description: `Egress of ${profile.name} workers`,
    });
    if (profile.container.egress === 'https') {
      this.securityGroup.addEgressRule(Peer.anyIpv4(), Port.tcp(443), 'HTTPS to the internet');
    } else {
      this.securityGroup.addEgressRule(
        Peer.ipv4(props.vpc.vpcCidrBlock),
        Port.tcp(443),
        'AWS APIs through VPC endpoints only',
      );
    }

    this.service = new FargateService(this, 'Service', {
      cluster: props.cluster,
      taskDefinition: this.taskDefinition,
      desiredCount: Math.min(Math.max(profile.container.desiredCount, capacity.minWorkers), capacity.maxWorkers),
      assignPublicIp: false,
      securityGroups: [this.securityGroup],
      vpcSubnets: { subnetType: SubnetType.PRIVATE_WITH_EGRESS },
      circuitBreaker: { rollback: true },
      minHealthyPercent: 100,
      maxHealthyPercent: 200,
    });

    this.scaleOnBacklog(props.queues, capacity);

    const stack = Stack.of(this);
    // X-Ray's write APIs take no resource-level permissions.
    Grant.addToPrincipal({
      grantee: this.taskDefinition.taskRole,
      actions: ['xray:PutTraceSegments', 'xray:PutTelemetryRecords'],
      resourceArns: ['*'],
    });
    Grant.addToPrincipal({
      grantee: this.taskDefinition.taskRole,
      actions: ['secretsmanager:GetSecretValue'],
      resourceArns: [
        stack.formatArn({
          service: 'secretsmanager',
          resource: 'secret',
          resourceName: `${props.secretPrefix}/${profile.name}/*`,
          arnFormat: ArnFormat.COLON_RESOURCE_NAME,
        }),
      ],
    });
  }

  /**
   * Target tracking on backlog per task, (waiting + in-flight messages) / running tasks, held at
   * `backlogPerWorker`: the rule the local scaler applies to its worker processes. The L2 policy
   * takes no metric math, so the policy is the L1 resource with the metric queries CloudFormation
   * accepts; AWS manages its alarms, so it adds no alarm to the stack.
   */
  private scaleOnBacklog(queues: readonly IQueue[], capacity: ProfileCapacity): void {
    const scaling = this.service.autoScaleTaskCount({
      minCapacity: capacity.minWorkers,
      maxCapacity: capacity.maxWorkers,
    });
    const queueMetric = (id: string, queue: IQueue, metricName: string) => ({
      id,
      returnData: false,
      metricStat: {
        metric: { namespace: 'AWS/SQS', metricName, dimensions: [{ name: 'QueueName', value: queue.queueName }] },
        stat: 'Sum',
      },
    });
    // Waiting and in-flight messages of every queue the service receives from.
    const backlog = queues.flatMap((queue, i) => [
      queueMetric(`visible${i}`, queue, 'ApproximateNumberOfMessagesVisible'),
      queueMetric(`inflight${i}`, queue, 'ApproximateNumberOfMessagesNotVisible'),
    ]);
    const total = backlog.map((m) => m.id).join(' + ');
    const policy = new CfnScalingPolicy(this, 'BacklogPerTask', {
      policyName: `${Names.uniqueId(this)}-backlog-per-task`.slice(-256),
      policyType: 'TargetTrackingScaling',
      serviceNamespace: 'ecs',
      resourceId: scaling.scalableTargetRef.resourceId,
      scalableDimension: scaling.scalableTargetRef.scalableDimension,
      targetTrackingScalingPolicyConfiguration: {
        targetValue: capacity.backlogPerWorker,
        scaleOutCooldown: 60,
        scaleInCooldown: 120,
        customizedMetricSpecification: {
          metrics: [
            ...backlog,
            {
              id: 'tasks',
              returnData: false,
              metricStat: {
                metric: {
                  namespace: 'ECS/ContainerInsights',
                  metricName: 'RunningTaskCount',
                  dimensions: [
                    { name: 'ClusterName', value: this.service.cluster.clusterName },
                    { name: 'ServiceName', value: this.service.serviceName },
                  ],
                },
                stat: 'Average',
              },
            },
            {
              id: 'backlogPerTask',
              label: 'Backlog per task',
              expression: `IF(tasks > 0, (${total}) / tasks, ${total})`,
              returnData: true,
            },
          ],
        },
      },
    });
    policy.node.addDependency(scaling);
  }
}
