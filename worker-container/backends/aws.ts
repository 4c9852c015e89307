import type { AwsActions } from '../../shared/app/worker-ports.js';
import type { Json } from '../../shared/domain/canonical.js';
import {
  ecsForceNewDeploymentParams,
  lambdaInvokeParams,
  rotateSecretParams,
  ssmSendCommandParams,
} from '../../shared/domain/catalogue.js';
import { ActionError, type ActionHandler, type Backend, typed } from './types.js';

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
 * `aws`: a small closed set of real AWS actions, called through the `AwsActions` port. Each is one API call with typed
 * params; there is no generic "call any API" action.
 */
export function makeAwsBackend(aws: AwsActions): Backend {
  const forceNewDeployment: ActionHandler = async ({ params, signal, output }) => {
    const { cluster, service } = typed(ecsForceNewDeploymentParams, params);
    const { deploymentId } = await attempt('ecs.forceNewDeployment', () =>
      aws.forceNewDeployment({ cluster, service }, signal),
    );
    output('stdout', `new deployment ${deploymentId ?? '?'} of ${cluster}/${service}`);
    return { output: { cluster, service, deploymentId: deploymentId ?? null } };
  };

  const sendCommand: ActionHandler = async ({ params, signal, output }) => {
    const { document_name, instance_ids, parameters } = typed(ssmSendCommandParams, params);
    const { commandId } = await attempt('ssm.sendCommand', () =>
      aws.sendCommand({ documentName: document_name, instanceIds: instance_ids, parameters }, signal),
    );
    output('stdout', `command ${commandId ?? '?'} sent to ${instance_ids.length} instance(s)`);
    return { output: { commandId: commandId ?? null, instances: instance_ids } };
  };

  const invoke: ActionHandler = async ({ params, signal, output }) => {
    const { function_name, payload } = typed(lambdaInvokeParams, params);
    const reply = await attempt('lambda.invoke', () =>
      aws.invoke(
        {
          functionName: function_name,
          ...(payload !== undefined && { payload: new TextEncoder().encode(JSON.stringify(payload)) }),
        },
        signal,
      ),
    );
    const text = reply.payload ? new TextDecoder().decode(reply.payload) : '';
    if (reply.functionError)
      throw new ActionError('LAMBDA_FUNCTION_ERROR', `${function_name} failed: ${text.slice(0, 500)}`, false);
    output('stdout', `${function_name} returned ${reply.statusCode ?? '?'}`);
    let result: Json = text;
    try {
      result = JSON.parse(text) as Json;
    } catch {
      // Not JSON: keep the text.
    }
    return { output: { statusCode: reply.statusCode ?? null, payload: result } };
  };

  const rotateSecret: ActionHandler = async ({ params, signal, output }) => {
    const { secret_id } = typed(rotateSecretParams, params);
    const { versionId } = await attempt('secretsmanager.rotateSecret', () =>
      aws.rotateSecret({ secretId: secret_id }, signal),
    );
    output('stdout', `rotation of ${secret_id} started (version ${versionId ?? '?'})`);
    return { output: { secretId: secret_id, versionId: versionId ?? null } };
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
