import type { ECSClient } from '@aws-sdk/client-ecs';
import { UpdateServiceCommand } from '@aws-sdk/client-ecs';
import type { LambdaClient } from '@aws-sdk/client-lambda';
import { InvokeCommand } from '@aws-sdk/client-lambda';
import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { RotateSecretCommand } from '@aws-sdk/client-secrets-manager';
import type { SSMClient } from '@aws-sdk/client-ssm';
import { SendCommandCommand } from '@aws-sdk/client-ssm';
import type { Json } from '../../shared/domain/canonical.js';
import {
  ecsForceNewDeploymentParams,
  lambdaInvokeParams,
  rotateSecretParams,
  ssmSendCommandParams,
} from '../../shared/domain/catalogue.js';
import { ActionError, type ActionHandler, type Backend, typed } from './types.js';

export interface AwsClients {
  readonly ecs: ECSClient;
  readonly ssm: SSMClient;
  readonly lambda: LambdaClient;
  readonly secretsManager: SecretsManagerClient;
}

/** AWS errors a later attempt may get past (throttling, a service blip); others are terminal. */
const RETRYABLE = new Set([
  'ThrottlingException',
  'TooManyRequestsException',
  'ServiceUnavailableException',
  'ServerException',
  'InternalServerError',
  'InternalFailure',
  'RequestLimitExceeded',
]);

/** Runs one SDK call, turning its failure into an {@link ActionError} with the service's error name. */
async function attempt<T>(what: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (error instanceof ActionError) throw error;
    const name = (error as Error).name;
    throw new ActionError(`AWS_${name}`, `${what}: ${(error as Error).message}`, RETRYABLE.has(name));
  }
}

/**
 * `aws`: a small closed set of real AWS actions through SDK v3. Each is one API call with typed
 * params; there is no generic "call any API" action.
 */
export function makeAwsBackend(clients: AwsClients): Backend {
  const forceNewDeployment: ActionHandler = async ({ params, signal, output }) => {
    const { cluster, service } = typed(ecsForceNewDeploymentParams, params);
    const { service: updated } = await attempt('ecs.forceNewDeployment', () =>
      clients.ecs.send(new UpdateServiceCommand({ cluster, service, forceNewDeployment: true }), {
        abortSignal: signal,
      }),
    );
    const deployment = updated?.deployments?.find((d) => d.status === 'PRIMARY');
    output('stdout', `new deployment ${deployment?.id ?? '?'} of ${cluster}/${service}`);
    return { output: { cluster, service, deploymentId: deployment?.id ?? null } };
  };

  const sendCommand: ActionHandler = async ({ params, signal, output }) => {
    const { document_name, instance_ids, parameters } = typed(ssmSendCommandParams, params);
    const { Command } = await attempt('ssm.sendCommand', () =>
      clients.ssm.send(
        new SendCommandCommand({ DocumentName: document_name, InstanceIds: instance_ids, Parameters: parameters }),
        { abortSignal: signal },
      ),
    );
    output('stdout', `command ${Command?.CommandId ?? '?'} sent to ${instance_ids.length} instance(s)`);
    return { output: { commandId: Command?.CommandId ?? null, instances: instance_ids } };
  };

  const invoke: ActionHandler = async ({ params, signal, output }) => {
    const { function_name, payload } = typed(lambdaInvokeParams, params);
    const reply = await attempt('lambda.invoke', () =>
      clients.lambda.send(
        new InvokeCommand({
          FunctionName: function_name,
          InvocationType: 'RequestResponse',
          ...(payload !== undefined && { Payload: new TextEncoder().encode(JSON.stringify(payload)) }),
        }),
        { abortSignal: signal },
      ),
    );
    const text = reply.Payload ? new TextDecoder().decode(reply.Payload) : '';
    if (reply.FunctionError)
      throw new ActionError('LAMBDA_FUNCTION_ERROR', `${function_name} failed: ${text.slice(0, 500)}`, false);
    output('stdout', `${function_name} returned ${reply.StatusCode ?? '?'}`);
    let result: Json = text;
    try {
      result = JSON.parse(text) as Json;
    } catch {
      // Not JSON: keep the text.
    }
    return { output: { statusCode: reply.StatusCode ?? null, payload: result } };
  };

  const rotateSecret: ActionHandler = async ({ params, signal, output }) => {
    const { secret_id } = typed(rotateSecretParams, params);
    const { VersionId } = await attempt('secretsmanager.rotateSecret', () =>
      clients.secretsManager.send(new RotateSecretCommand({ SecretId: secret_id }), { abortSignal: signal }),
    );
    output('stdout', `rotation of ${secret_id} started (version ${VersionId ?? '?'})`);
    return { output: { secretId: secret_id, versionId: VersionId ?? null } };
  };

  return {
    name: 'aws',
    actions: {
      'ecs.forceNewDeployment': forceNewDeployment,
      'ssm.sendCommand': sendCommand,
      'lambda.invoke': invoke,
      'secretsmanager.rotateSecret': rotateSecret,
    },
  };
}
