import { type ECSClient, UpdateServiceCommand } from '@aws-sdk/client-ecs';
import { InvokeCommand, type LambdaClient } from '@aws-sdk/client-lambda';
import { RotateSecretCommand, type SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SendCommandCommand, type SSMClient } from '@aws-sdk/client-ssm';
import type { AwsActions } from '../../app/worker-ports.js';

export interface AwsActionClients {
  readonly ecs: ECSClient;
  readonly ssm: SSMClient;
  readonly lambda: LambdaClient;
  readonly secretsManager: SecretsManagerClient;
}

/** The `aws` backend's calls through SDK v3: one API call per action, cancelled by the step's signal. */
export function makeAwsActions(clients: AwsActionClients): AwsActions {
  return {
    async forceNewDeployment({ cluster, service }, signal) {
      const { service: updated } = await clients.ecs.send(
        new UpdateServiceCommand({ cluster, service, forceNewDeployment: true }),
        { abortSignal: signal },
      );
      const deployment = updated?.deployments?.find((d) => d.status === 'PRIMARY');
      return deployment?.id === undefined ? {} : { deploymentId: deployment.id };
    },

    async sendCommand({ documentName, instanceIds, parameters }, signal) {
      const { Command } = await clients.ssm.send(
        new SendCommandCommand({ DocumentName: documentName, InstanceIds: [...instanceIds], Parameters: parameters }),
        { abortSignal: signal },
      );
      return Command?.CommandId === undefined ? {} : { commandId: Command.CommandId };
    },

    async invoke({ functionName, payload }, signal) {
      const reply = await clients.lambda.send(
        new InvokeCommand({
          FunctionName: functionName,
          InvocationType: 'RequestResponse',
          ...(payload !== undefined && { Payload: payload }),
        }),
        { abortSignal: signal },
      );
      return {
        ...(reply.StatusCode !== undefined && { statusCode: reply.StatusCode }),
        ...(reply.FunctionError !== undefined && { functionError: reply.FunctionError }),
        ...(reply.Payload !== undefined && { payload: reply.Payload }),
      };
    },

    async rotateSecret({ secretId }, signal) {
      const { VersionId } = await clients.secretsManager.send(new RotateSecretCommand({ SecretId: secretId }), {
        abortSignal: signal,
      });
      return VersionId === undefined ? {} : { versionId: VersionId };
    },
  };
}
