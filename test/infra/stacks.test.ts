import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { Queue } from 'aws-cdk-lib/aws-sqs';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../infra/app.js';
import { capacityOf } from '../../shared/config.js';
import { SANDBOX_PROFILE_NAMES, SANDBOX_PROFILES } from '../../shared/domain/sandbox-profiles.js';

const CONTEXT = {
  'capstan:jwtIssuer': 'https://auth.example.com/',
  'capstan:jwksUrl': 'https://auth.example.com/.well-known/jwks.json',
  // Bundling is exercised by `npm run synth`; the assertions only need the templates.
  'aws:cdk:bundling-stacks': [],
};

let stateful: Template;
let stateless: Template;

beforeAll(() => {
  const built = buildApp(new App({ context: CONTEXT }));
  stateful = Template.fromStack(built.stateful);
  stateless = Template.fromStack(built.stateless);
});

type Resource = { Properties: Record<string, unknown> };
const resources = (template: Template, type: string) =>
  Object.entries(template.findResources(type)) as Array<[string, Resource]>;
/** A logical id without the name of the stack part (construct) that holds the resource. */
const inPart = (id: string) =>
  id.replace(/^(RunInterpreter|RestApi|LiveStream|Reconciler|TicketIngest|LifecyclePublisher|Workers|Operations)/, '');

describe('the stateful stack', () => {
  it('keeps the event log with point-in-time recovery and a NEW_IMAGE stream', () => {
    stateful.hasResourceProperties('AWS::DynamoDB::Table', {
      TableName: 'capstan-events',
      KeySchema: [
        { AttributeName: 'runId', KeyType: 'HASH' },
        { AttributeName: 'seq', KeyType: 'RANGE' },
      ],
      PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
      StreamSpecification: { StreamViewType: 'NEW_IMAGE' },
      SSESpecification: Match.objectLike({ SSEEnabled: true, SSEType: 'KMS' }),
    });
  });

  it('turns point-in-time recovery on for every table', () => {
    const tables = resources(stateful, 'AWS::DynamoDB::Table');
    expect(tables).toHaveLength(3);
    for (const [, table] of tables) {
      expect(table.Properties.PointInTimeRecoverySpecification).toEqual({ PointInTimeRecoveryEnabled: true });
    }
  });

  it('puts a dead-letter queue behind every profile queue and its priority queue', () => {
    const queues = resources(stateful, 'AWS::SQS::Queue');
    const withRedrive = queues.filter(([, q]) => q.Properties.RedrivePolicy !== undefined);
    expect(withRedrive).toHaveLength(2 * SANDBOX_PROFILE_NAMES.length);
    for (const profile of SANDBOX_PROFILE_NAMES) {
      for (const name of [`capstan-${profile}-steps`, `capstan-${profile}-steps-priority`])
        stateful.hasResourceProperties('AWS::SQS::Queue', {
          QueueName: name,
          KmsMasterKeyId: Match.anyValue(),
          RedrivePolicy: {
            deadLetterTargetArn: Match.anyValue(),
            maxReceiveCount: SANDBOX_PROFILES[profile].maxReceiveCount,
          },
        });
    }
  });

  it('rotates the key and blocks public access to the evidence bucket', () => {
    stateful.hasResourceProperties('AWS::KMS::Key', { EnableKeyRotation: true });
    stateful.hasResourceProperties('AWS::S3::Bucket', {
      VersioningConfiguration: { Status: 'Enabled' },
      PublicAccessBlockConfiguration: {
        BlockPublicAcls: true,
        BlockPublicPolicy: true,
        IgnorePublicAcls: true,
        RestrictPublicBuckets: true,
      },
    });
  });
});

describe('the stateless stack', () => {
  it('runs every function on Node.js 24, arm64, with active tracing', () => {
    // aws-cdk-lib's own deploy-time functions (the console's file copy and bucket cleanup) are its choice.
    const functions = resources(stateless, 'AWS::Lambda::Function').filter(
      ([id]) => !/^Custom(CDKBucketDeployment|S3AutoDeleteObjects)/.test(id),
    );
    expect(functions.length).toBeGreaterThan(10);
    for (const [, fn] of functions) {
      expect(fn.Properties).toMatchObject({
        Runtime: 'nodejs24.x',
        Architectures: ['arm64'],
        TracingConfig: { Mode: 'Active' },
      });
    }
  });

  it('defines one hardened Fargate task definition per sandbox profile', () => {
    const taskDefinitions = resources(stateless, 'AWS::ECS::TaskDefinition');
    expect(taskDefinitions).toHaveLength(SANDBOX_PROFILE_NAMES.length);
    for (const profile of SANDBOX_PROFILE_NAMES) {
      const settings = SANDBOX_PROFILES[profile];
      stateless.hasResourceProperties('AWS::ECS::TaskDefinition', {
        Cpu: String(settings.container.cpu),
        Memory: String(settings.container.memoryMiB),
        RuntimePlatform: { CpuArchitecture: 'ARM64', OperatingSystemFamily: 'LINUX' },
        // The worker, beside its X-Ray daemon sidecar.
        ContainerDefinitions: Match.arrayWith([
          Match.objectLike({
            User: '1000:1000',
            ReadonlyRootFilesystem: settings.container.readOnlyRootFilesystem,
            StopTimeout: settings.stopTimeoutSeconds,
            LinuxParameters: Match.objectLike({ Capabilities: { Drop: ['ALL'] }, InitProcessEnabled: true }),
            Environment: Match.arrayWith([{ Name: 'CAPSTAN_SANDBOX_PROFILE', Value: profile }]),
          }),
        ]),
      });
    }
  });

  it('runs workers without a public IP', () => {
    const services = resources(stateless, 'AWS::ECS::Service');
    expect(services).toHaveLength(SANDBOX_PROFILE_NAMES.length);
    for (const [, service] of services) {
      expect(service.Properties.NetworkConfiguration).toMatchObject({
        AwsvpcConfiguration: { AssignPublicIp: 'DISABLED' },
      });
    }
  });

  it("scales each profile's workers on its queue backlog per task, between its bounds", () => {
    const targets = resources(stateless, 'AWS::ApplicationAutoScaling::ScalableTarget');
    expect(targets).toHaveLength(SANDBOX_PROFILE_NAMES.length);
    for (const profile of SANDBOX_PROFILE_NAMES) {
      const { minWorkers, maxWorkers } = capacityOf(undefined, profile);
      expect(
        targets.some(
          ([id, t]) =>
            inPart(id).startsWith(`Workers${profile.replace('-', '')}`) &&
            t.Properties.MinCapacity === minWorkers &&
            t.Properties.MaxCapacity === maxWorkers &&
            t.Properties.ScalableDimension === 'ecs:service:DesiredCount',
        ),
      ).toBe(true);
    }
    const policies = resources(stateless, 'AWS::ApplicationAutoScaling::ScalingPolicy');
    expect(policies).toHaveLength(SANDBOX_PROFILE_NAMES.length);
    for (const [, policy] of policies) {
      expect(policy.Properties.PolicyType).toBe('TargetTrackingScaling');
      const tracking = policy.Properties.TargetTrackingScalingPolicyConfiguration as {
        TargetValue: number;
        CustomizedMetricSpecification: { Metrics: Array<Record<string, unknown>> };
      };
      expect(tracking.TargetValue).toBe(capacityOf(undefined, 'dev-flex').backlogPerWorker);
      const metrics = JSON.stringify(tracking.CustomizedMetricSpecification.Metrics);
      for (const name of [
        'ApproximateNumberOfMessagesVisible',
        'ApproximateNumberOfMessagesNotVisible',
        'RunningTaskCount',
      ])
        expect(metrics).toContain(name);
      // The backlog is the step queue's and the priority queue's together.
      expect(metrics).toContain('(visible0 + inflight0 + visible1 + inflight1) / tasks');
    }
  });

  it('limits prod-critical egress to HTTPS inside the VPC', () => {
    const groups = resources(stateless, 'AWS::EC2::SecurityGroup').filter(([, g]) =>
      String(g.Properties.GroupDescription).includes('prod-critical workers'),
    );
    expect(groups).toHaveLength(1);
    const egress = groups[0]?.[1].Properties.SecurityGroupEgress as Array<Record<string, unknown>>;
    expect(egress).toHaveLength(1);
    expect(egress[0]).toMatchObject({
      IpProtocol: 'tcp',
      FromPort: 443,
      ToPort: 443,
      CidrIp: { 'Fn::GetAtt': [expect.any(String), 'CidrBlock'] },
    });
  });

  it("scopes each worker's queue and secrets to its own profile", () => {
    const policies = resources(stateless, 'AWS::IAM::Policy').filter(([id]) =>
      inPart(id).startsWith('Workersprodcritical'),
    );
    const text = JSON.stringify(policies);
    expect(text).toContain('secret:capstan/prod-critical/*');
    expect(text).not.toContain('capstan/dev-flex');
    expect(text).toMatch(/sqs:ReceiveMessage/);
    expect(text).not.toMatch(/devflex/i);
  });

  it('inlines the shared run interpreter with its functions substituted', () => {
    stateless.hasResourceProperties('AWS::StepFunctions::StateMachine', {
      StateMachineName: 'capstan-run-interpreter',
      DefinitionString: Match.anyValue(),
      DefinitionSubstitutions: {
        PlanFunctionArn: Match.anyValue(),
        DispatchFunctionArn: Match.anyValue(),
        AwaitApprovalFunctionArn: Match.anyValue(),
        AwaitResumeFunctionArn: Match.anyValue(),
      },
      TracingConfiguration: { Enabled: true },
    });
  });

  it('feeds the event-log stream to the broadcaster with a failure destination', () => {
    stateless.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      StartingPosition: 'TRIM_HORIZON',
      BisectBatchOnFunctionError: true,
      DestinationConfig: { OnFailure: { Destination: Match.anyValue() } },
      FunctionResponseTypes: ['ReportBatchItemFailures'],
    });
  });

  it('schedules the reconciler every minute and routes ticket events', () => {
    stateless.hasResourceProperties('AWS::Events::Rule', { ScheduleExpression: 'rate(1 minute)' });
    stateless.hasResourceProperties('AWS::Events::Rule', {
      EventPattern: { source: [{ 'anything-but': ['capstan'] }], 'detail-type': ['Ticket'] },
      Targets: [
        Match.objectLike({
          DeadLetterConfig: { Arn: Match.anyValue() },
          RetryPolicy: Match.objectLike({ MaximumRetryAttempts: 8 }),
        }),
      ],
    });
  });

  it('gives the ticket ingest function a dead-letter queue and only the access it needs', () => {
    const ingest = resources(stateless, 'AWS::Lambda::Function').filter(([id]) => id.startsWith('TicketIngest'));
    expect(ingest).toHaveLength(1);
    expect(ingest[0]![1].Properties.DeadLetterConfig).toEqual({ TargetArn: expect.anything() });
    const actions = actionsOf('Fnticketingest');
    expect(actions).toEqual(expect.arrayContaining(['states:StartExecution', 'dynamodb:PutItem', 'sqs:SendMessage']));
    for (const denied of [
      'states:SendTaskSuccess',
      'states:StopExecution',
      'secretsmanager:GetSecretValue',
      'events:PutEvents',
    ])
      expect(actions).not.toContain(denied);
  });

  it('lets the webhook route read only the webhook signing keys', () => {
    const statements = resources(stateless, 'AWS::IAM::Policy')
      .filter(([id]) => inPart(id).startsWith('Fnapiwebhook'))
      .flatMap(([, p]) => (p.Properties.PolicyDocument as { Statement: Array<Record<string, unknown>> }).Statement);
    const secrets = statements.filter((st) => st.Action === 'secretsmanager:GetSecretValue');
    expect(secrets).toHaveLength(1);
    expect(JSON.stringify(secrets[0]!.Resource)).toContain(':secret:capstan/webhooks/*');
    expect(actionsOf('Fnapiwebhook')).toContain('states:StartExecution');
  });

  it('publishes lifecycle events from the event-log stream with retries and a failure destination', () => {
    expect(actionsOf('Fnlifecyclepublisher')).toContain('events:PutEvents');
    expect(actionsOf('Fnlifecyclepublisher')).not.toContain('dynamodb:PutItem');
    stateless.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      MaximumRetryAttempts: 10,
      DestinationConfig: { OnFailure: { Destination: Match.anyValue() } },
      FunctionResponseTypes: ['ReportBatchItemFailures'],
    });
  });

  it("recovers a stopped worker task's steps at once, from the workers' cluster's task state changes", () => {
    const [[clusterId] = []] = resources(stateless, 'AWS::ECS::Cluster');
    const [[fnId] = []] = resources(stateless, 'AWS::Lambda::Function').filter(([id]) =>
      inPart(id).startsWith('DeathsFnworkerstopped'),
    );
    expect(fnId).toBeDefined();
    stateless.hasResourceProperties('AWS::Events::Rule', {
      EventPattern: {
        source: ['aws.ecs'],
        'detail-type': ['ECS Task State Change'],
        detail: { clusterArn: [{ 'Fn::GetAtt': [clusterId, 'Arn'] }], lastStatus: ['STOPPED'] },
      },
      Targets: [Match.objectLike({ Arn: { 'Fn::GetAtt': [fnId, 'Arn'] } })],
    });
    expect(actionsOf('DeathsFnworkerstopped')).toEqual(
      expect.arrayContaining(['states:SendTaskSuccess', 'dynamodb:UpdateItem']),
    );
    expect(actionsOf('DeathsFnworkerstopped')).not.toContain('states:StartExecution');
  });

  it('alarms on every dead-letter queue and has a dashboard', () => {
    const alarms = resources(stateless, 'AWS::CloudWatch::Alarm');
    expect(alarms.filter(([id]) => inPart(id).startsWith('DlqAlarm'))).toHaveLength(SANDBOX_PROFILE_NAMES.length);
    stateless.resourceCountIs('AWS::CloudWatch::Dashboard', 1);
  });

  it('authorizes every REST method but the health check and the OpenAPI document', () => {
    const methods = resources(stateless, 'AWS::ApiGateway::Method');
    const open = methods.filter(
      ([, m]) => m.Properties.AuthorizationType === 'NONE' && m.Properties.HttpMethod !== 'OPTIONS',
    );
    expect(open.map(([id]) => id).sort()).toEqual([
      expect.stringMatching(/^RestApiv1healthGET/),
      expect.stringMatching(/^RestApiv1openapijsonGET/),
      // A webhook's signature authenticates it (docs/intake.md).
      expect.stringMatching(/^RestApiv1webhookssourcePOST/),
    ]);
  });

  it('lets only the reconcile route, of the REST routes, restart interpreter executions and send commands', () => {
    expect(actionsOf('Fnapireconcile')).toEqual(
      expect.arrayContaining(['states:StartExecution', 'states:SendTaskSuccess', 'sqs:SendMessage']),
    );
    expect(actionsOf('Fnapilistworkers')).not.toContain('sqs:SendMessage');
  });

  /** Every IAM action the default policy of a function's role allows. */
  const actionsOf = (functionId: string): string[] =>
    resources(stateless, 'AWS::IAM::Policy')
      .filter(([id]) => inPart(id).startsWith(functionId))
      .flatMap(([, policy]) =>
        (policy.Properties.PolicyDocument as { Statement: Array<{ Action: string | string[] }> }).Statement.flatMap(
          (statement) => statement.Action,
        ),
      );

  it('grants each function only the AWS access its handler needs', () => {
    expect(actionsOf('Fnapicreaterun')).toEqual(
      expect.arrayContaining(['states:StartExecution', 'sqs:GetQueueAttributes']),
    );
    expect(actionsOf('Fnapicreaterun')).not.toContain('sqs:SendMessage');
    for (const readOnly of ['Fnapilistruns', 'Fnapigetrun', 'Fnplan']) {
      expect(actionsOf(readOnly)).not.toContain('states:StartExecution');
      expect(actionsOf(readOnly)).not.toContain('states:SendTaskSuccess');
      expect(actionsOf(readOnly)).not.toContain('sqs:SendMessage');
    }
    // Cancel, rollback, resume and approval decisions wake a waiting task; none starts one.
    for (const waking of ['Fnapicancelrun', 'Fnapirollbackrun', 'Fnapiresumerun', 'Fnapidecideapproval']) {
      expect(actionsOf(waking)).toContain('states:SendTaskSuccess');
      expect(actionsOf(waking)).not.toContain('states:StartExecution');
    }
    expect(actionsOf('Fndispatch')).toEqual(expect.arrayContaining(['sqs:SendMessage', 'states:SendTaskSuccess']));
    expect(actionsOf('Fnapihealth')).toEqual(
      expect.arrayContaining(['sqs:GetQueueAttributes', 'states:DescribeStateMachine', 's3:ListBucket']),
    );
    expect(actionsOf('Fnapihealth')).not.toContain('dynamodb:PutItem');
  });
});

describe('the routing document at synth', () => {
  const withRoutes = (doc: unknown) => {
    const dir = mkdtempSync(join(tmpdir(), 'capstan-routes-'));
    const file = join(dir, 'routes.json');
    writeFileSync(file, JSON.stringify(doc));
    return new App({ context: { ...CONTEXT, 'capstan:routesFile': file } });
  };

  it('passes a checked routing document to the intake functions', () => {
    const built = buildApp(withRoutes({ rules: [{ id: 'alerts', match: { type: 'alert' }, runbook: 'hello' }] }));
    const template = Template.fromStack(built.stateless);
    const ingest = Object.entries(template.findResources('AWS::Lambda::Function')).filter(([id]) =>
      id.startsWith('TicketIngest'),
    ) as Array<[string, Resource]>;
    expect(JSON.stringify(ingest[0]![1].Properties.Environment)).toContain('CAPSTAN_ROUTES');
  });

  it('fails synthesis when a rule names an unknown runbook', () => {
    expect(() => buildApp(withRoutes({ rules: [{ id: 'bad', runbook: 'no-such-runbook' }] }))).toThrow(
      /capstan:routesFile .*rule 'bad' -> 'no-such-runbook'/,
    );
  });
});

describe('cdk-nag', () => {
  it('reports no unacknowledged AwsSolutions finding', () => {
    const { app } = buildApp(new App({ context: CONTEXT }));
    expect(() => app.synth()).not.toThrow();
  });

  it('fails synthesis on a new unacknowledged finding', () => {
    const { app, stateless: stack } = buildApp(new App({ context: CONTEXT }));
    new Queue(stack, 'PlainQueue');
    expect(() => app.synth()).toThrow(/AwsSolutions-SQS4/);
  });
});
