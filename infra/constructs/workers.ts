import { fileURLToPath } from 'node:url';
import { FlowLogDestination, InterfaceVpcEndpointAwsService, SubnetType, Vpc } from 'aws-cdk-lib/aws-ec2';
import { Platform } from 'aws-cdk-lib/aws-ecr-assets';
import { Cluster, ContainerImage, ContainerInsights } from 'aws-cdk-lib/aws-ecs';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { type CapacityConfig, capacityOf } from '../../shared/config.js';
import { SANDBOX_PROFILES, type SandboxProfileName } from '../../shared/domain/sandbox-profiles.js';
import { grantNodeQueues, type RunResources } from './run-resources.js';
import { WorkerDeaths } from './worker-deaths.js';
import { WorkerService } from './worker-service.js';

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface WorkersProps {
  /** One service per profile in `resources.queues`, consuming that profile's queue. */
  readonly resources: RunResources;
  /** Secrets the workers may read live under `<secretPrefix>/<profile>/`. */
  readonly secretPrefix: string;
  /** @default 2 */
  readonly maxAzs?: number;
  /** Scaling bounds and target per profile. @default each profile's defaults (`capacityOf`) */
  readonly capacity?: CapacityConfig;
}

/**
 * The workers: a private VPC reaching AWS through interface endpoints, one cluster, and one
 * hardened Fargate service per sandbox profile, each granted its own queue and the run state,
 * and the reaction to a worker task that stops.
 */
export class Workers extends Construct {
  public readonly vpc: Vpc;
  public readonly cluster: Cluster;
  public readonly services: ReadonlyMap<SandboxProfileName, WorkerService>;
  /** The reaction to a stopped worker task (the lease is the backstop). */
  public readonly deaths: WorkerDeaths;

  constructor(scope: Construct, id: string, props: WorkersProps) {
    super(scope, id);
    const { resources } = props;
    if (resources.queues.size === 0) throw new Error('Workers needs at least one profile queue');
    this.vpc = new Vpc(this, 'Vpc', {
      maxAzs: props.maxAzs ?? 2,
      natGateways: 1,
      subnetConfiguration: [
        { name: 'public', subnetType: SubnetType.PUBLIC },
        { name: 'workers', subnetType: SubnetType.PRIVATE_WITH_EGRESS },
      ],
      flowLogs: {
        all: {
          destination: FlowLogDestination.toCloudWatchLogs(
            new LogGroup(this, 'FlowLogs', { retention: RetentionDays.ONE_MONTH, encryptionKey: resources.key }),
          ),
        },
      },
    });
    for (const [name, service] of Object.entries({
      Sqs: InterfaceVpcEndpointAwsService.SQS,
      Dynamo: InterfaceVpcEndpointAwsService.DYNAMODB,
      Secrets: InterfaceVpcEndpointAwsService.SECRETS_MANAGER,
      States: InterfaceVpcEndpointAwsService.STEP_FUNCTIONS,
      Logs: InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS,
      Ecr: InterfaceVpcEndpointAwsService.ECR,
      EcrDocker: InterfaceVpcEndpointAwsService.ECR_DOCKER,
      S3: InterfaceVpcEndpointAwsService.S3,
      XRay: InterfaceVpcEndpointAwsService.XRAY,
    })) {
      this.vpc.addInterfaceEndpoint(name, { service, subnets: { subnetType: SubnetType.PRIVATE_WITH_EGRESS } });
    }
    this.cluster = new Cluster(this, 'Cluster', { vpc: this.vpc, containerInsightsV2: ContainerInsights.ENABLED });
    const image = ContainerImage.fromAsset(REPO_ROOT, {
      file: 'worker-container/Dockerfile',
      platform: Platform.LINUX_ARM64,
      exclude: ['**', '!worker-container/**', '!shared/**', '!package.json', '!package-lock.json', '!tsconfig.json'],
    });

    const services = new Map<SandboxProfileName, WorkerService>();
    for (const [profileName, pq] of resources.queues) {
      const worker = new WorkerService(this, `Workers-${profileName}`, {
        profile: SANDBOX_PROFILES[profileName],
        cluster: this.cluster,
        vpc: this.vpc,
        image,
        environment: { ...resources.environment, CAPSTAN_QUEUE_URL: pq.queue.queueUrl },
        secretPrefix: props.secretPrefix,
        logKey: resources.key,
        queues: pq.stepQueues,
        capacity: capacityOf(props.capacity, profileName),
      });
      const taskRole = worker.taskDefinition.taskRole;
      for (const queue of pq.stepQueues) {
        queue.grantConsumeMessages(taskRole);
        // Recording a result may start a fan-out step's next targets, on the same profile's queues.
        queue.grantSendMessages(taskRole);
      }
      // An agent worker creates its node's queue, redriving to the profile's dead-letter queue.
      grantNodeQueues(resources, taskRole, 'own');
      pq.deadLetterQueue.grant(taskRole, 'sqs:GetQueueUrl', 'sqs:GetQueueAttributes');
      resources.state.grantReadWriteData(taskRole);
      resources.events.grantReadWriteData(taskRole);
      resources.interpreter.grantTaskResponse(taskRole);
      // Steps store their artifacts under the run; they never read or list the bucket.
      resources.evidenceBucket.grantPut(taskRole, 'artifacts/*');
      services.set(profileName, worker);
    }
    this.services = services;
    this.deaths = new WorkerDeaths(this, 'Deaths', { resources, cluster: this.cluster });
  }
}
