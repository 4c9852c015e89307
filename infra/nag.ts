import { nodeQueuePrefix } from '../shared/resources/queues.js';
import { Stack, Validations } from 'aws-cdk-lib';
import type { IConstruct } from 'constructs';
import type { DeploymentConfig } from './config.js';
import { physicalNames } from './names.js';
import type { StatefulStack } from './stateful-stack.js';
import type { StatelessStack } from './stateless-stack.js';

/** The flat text cdk-nag uses for a CloudFormation value in a finding id (`<Logical.Arn>:*`, `<AWS::Region>`). */
export function nagText(value: unknown): string {
  if (value === undefined) return '';
  if (typeof value === 'string') return value.replace(/\$\{/g, '<').replace(/\}/g, '>');
  if (value !== null && typeof value === 'object') {
    const node = value as Record<string, unknown>;
    if (Array.isArray(node['Fn::Join'])) {
      const [delimiter, items] = node['Fn::Join'] as [string, unknown[]];
      return items.map(nagText).join(delimiter);
    }
    if ('Fn::Sub' in node) return nagText(node['Fn::Sub']);
    if (Array.isArray(node['Fn::GetAtt'])) {
      const [resource, attribute] = node['Fn::GetAtt'] as [unknown, unknown];
      return `<${nagText(resource)}.${nagText(attribute)}>`;
    }
    if ('Fn::ImportValue' in node) return nagText(node['Fn::ImportValue']);
    if ('Ref' in node) return `<${nagText(node.Ref)}>`;
  }
  return JSON.stringify(value);
}

/** The finding id of a wildcard resource, as cdk-nag reports it for `scope`'s stack. */
export function wildcardResource(scope: IConstruct, resource: string): string {
  return `AwsSolutions-IAM5[Resource::${nagText(Stack.of(scope).resolve(resource))}]`;
}

/** Acknowledges findings on a construct and everything under it, all for one reason. */
export function acknowledge(scope: IConstruct, reason: string, ids: readonly string[]): void {
  for (const id of ids) Validations.of(scope).acknowledge({ id, reason });
}

/** Every cdk-nag finding Capstan accepts, each with the reason it is accepted. */
export function acknowledgeFindings(
  config: DeploymentConfig,
  stateful: StatefulStack,
  stateless: StatelessStack,
): void {
  const names = physicalNames(config.prefix, stateless);
  acknowledge(
    stateful,
    'The access-log bucket receives the evidence bucket access logs; logging it to itself would loop.',
    ['AwsSolutions-S1'],
  );

  acknowledge(
    stateless,
    'Lambda functions write their own logs with the AWS managed basic execution policy; it grants only CloudWatch Logs writes.',
    ['AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]'],
  );
  acknowledge(stateless, 'API Gateway needs this managed policy to write its execution logs to CloudWatch.', [
    'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs]',
  ]);
  acknowledge(
    stateless,
    'X-Ray trace writes, DynamoDB ListStreams and the task-token APIs of Step Functions do not support resource-level permissions.',
    ['AwsSolutions-IAM5[Resource::*]'],
  );
  acknowledge(
    stateless,
    'KMS grants on the Capstan key use the wildcard data-key actions CDK grants generate; the resource is the one key.',
    ['AwsSolutions-IAM5[Action::kms:ReEncrypt*]', 'AwsSolutions-IAM5[Action::kms:GenerateDataKey*]'],
  );
  acknowledge(
    stateless,
    'Queries on the state table use its global secondary indexes (gsi1 for listings, gsi2 for leases by owner).',
    [
      wildcardResource(
        stateless,
        `arn:${stateless.partition}:dynamodb:${stateless.region}:${stateless.account}:table/${names.tables.state}/index/*`,
      ),
      wildcardResource(
        stateless,
        `arn:${stateless.partition}:dynamodb:${stateless.region}:${stateless.account}:table/${names.tables.events}/index/*`,
      ),
      wildcardResource(
        stateless,
        `arn:${stateless.partition}:dynamodb:${stateless.region}:${stateless.account}:table/${names.tables.connections}/index/*`,
      ),
    ],
  );
  acknowledge(stateless, 'Reading run status needs DescribeExecution on the executions of the one run interpreter.', [
    wildcardResource(
      stateless,
      `arn:${stateless.partition}:states:${stateless.region}:${stateless.account}:execution:${names.stateMachine}:*`,
    ),
  ]);
  acknowledge(stateless, 'Evidence bundles are objects under the one evidence bucket.', [
    'AwsSolutions-IAM5[Action::s3:GetObject*]',
    'AwsSolutions-IAM5[Action::s3:GetBucket*]',
    'AwsSolutions-IAM5[Action::s3:List*]',
    'AwsSolutions-IAM5[Action::s3:DeleteObject*]',
    'AwsSolutions-IAM5[Action::s3:Abort*]',
    wildcardResource(stateless, `arn:${stateless.partition}:s3:::${names.evidenceBucket}/*`),
  ]);
  acknowledge(stateless, 'The run interpreter invokes any version of its own workflow functions.', [
    ...['plan', 'dispatch', 'await-approval', 'await-resume'].flatMap((name) => {
      const f = stateless.functions.get(name);
      return f ? [wildcardResource(stateless, `${f.functionArn}:*`)] : [];
    }),
  ]);
  acknowledge(
    stateless,
    'The WebSocket functions post to, and close, any connection of the one Capstan WebSocket API.',
    [
      wildcardResource(
        stateless,
        `arn:${stateless.partition}:execute-api:${stateless.region}:${stateless.account}:${stateless.webSocketApi.apiId}/*/*/@connections/*`,
      ),
    ],
  );
  acknowledge(
    stateless,
    'Agent node queues are created by agent workers when they register, so their names are known only at run time; every one starts with the deployment prefix and -node-.',
    [
      wildcardResource(
        stateless,
        `arn:${stateless.partition}:sqs:${stateless.region}:${stateless.account}:${nodeQueuePrefix(config.prefix)}*`,
      ),
    ],
  );
  for (const [profile, worker] of stateless.workers) {
    acknowledge(
      worker,
      'Workers read only the secrets under their own profile prefix; the step names which one at run time.',
      [
        wildcardResource(
          worker,
          `arn:${stateless.partition}:secretsmanager:${stateless.region}:${stateless.account}:secret:${config.secretPrefix}/${profile}/*`,
        ),
      ],
    );
    acknowledge(worker, 'Workers put the artifacts their steps produce, and only under the artifacts prefix.', [
      wildcardResource(worker, `arn:${stateless.partition}:s3:::${names.evidenceBucket}/artifacts/*`),
    ]);
    acknowledge(
      worker,
      'The worker environment holds resource names and the profile name only; secrets come from Secrets Manager at step start.',
      ['AwsSolutions-ECS2'],
    );
  }
  acknowledge(
    stateless,
    'Interface endpoints accept HTTPS from inside the VPC only (the VPC CIDR), which the rule cannot read as it is an intrinsic.',
    ['AwsSolutions-EC23'],
  );
  acknowledge(
    stateless,
    'Callers authenticate with JWTs from the organisation identity provider, checked by the Lambda authorizer (issuer, audience, JWKS); Cognito is not required.',
    ['AwsSolutions-COG4'],
  );
  acknowledge(
    stateless,
    'The health check and the OpenAPI document (the API contract, no tenant data) are public by design; WebSocket $disconnect and $default run on a connection already authorized at $connect.',
    ['AwsSolutions-APIG4'],
  );
  acknowledge(
    stateless,
    'A regional WAF web ACL is organisation-specific; deployers associate their own with the prod stage.',
    ['AwsSolutions-APIG3'],
  );
  acknowledge(
    stateless,
    'Every handler parses its request with a zod schema and answers 4xx naming the field; the WebSocket API has no request models.',
    ['AwsSolutions-APIG2'],
  );
  acknowledge(
    stateless,
    'The webhook route reads the signing key of the source named in its path, only under the webhooks prefix.',
    [
      wildcardResource(
        stateless,
        `arn:${stateless.partition}:secretsmanager:${stateless.region}:${stateless.account}:secret:${config.secretPrefix}/webhooks/*`,
      ),
    ],
  );
  acknowledge(
    stateless,
    'These queues are themselves dead-letter destinations (the event-stream mappings, ticket ingest).',
    ['AwsSolutions-SQS3'],
  );
}
