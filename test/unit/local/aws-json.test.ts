import { DescribeStateMachineCommand, SFNClient, StateMachineDoesNotExist } from '@aws-sdk/client-sfn';
import { afterEach, describe, expect, it } from 'vitest';
import { InProcessOrHttp } from '../../../shared/adapters/in-process.js';
import { AwsServiceError, type JsonService, requireString, startJsonService } from '../../../local/aws-json.js';
import { freePort } from '../../support/local-dynamodb.js';

const ARN = 'arn:aws:states:us-east-1:000000000000:stateMachine:capstan-test';

let service: JsonService | undefined;
afterEach(async () => {
  await service?.close();
  service = undefined;
});

/** A JSON service that knows one state machine, counting the requests its HTTP server gets. */
async function start() {
  const operations: string[] = [];
  service = await startJsonService({
    port: await freePort(),
    targetPrefix: 'AWSStepFunctions',
    onRequest: (operation) => operations.push(operation),
    operations: {
      DescribeStateMachine: (input) => {
        if (requireString(input, 'stateMachineArn') !== ARN)
          throw new AwsServiceError('StateMachineDoesNotExist', 'State Machine Does Not Exist');
        return {
          stateMachineArn: ARN,
          name: 'capstan-test',
          status: 'ACTIVE',
          definition: '{}',
          roleArn: 'r',
          type: 'STANDARD',
          creationDate: 0,
        };
      },
    },
  });
  let overHttp = 0;
  service.server.on('request', () => overHttp++);
  const client = new SFNClient({
    endpoint: service.endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    requestHandler: new InProcessOrHttp(),
  });
  return { client, operations, overHttp: () => overHttp };
}

describe('a local AWS JSON service', () => {
  it("answers this process's SDK clients without its HTTP server, as it answers over HTTP", async () => {
    const { client, operations, overHttp } = await start();

    const inProcess = await client.send(new DescribeStateMachineCommand({ stateMachineArn: ARN }));
    const http = await fetch(service?.endpoint ?? '', {
      method: 'POST',
      headers: {
        'x-amz-target': 'AWSStepFunctions.DescribeStateMachine',
        'content-type': 'application/x-amz-json-1.0',
      },
      body: JSON.stringify({ stateMachineArn: ARN }),
    });

    expect(inProcess.status).toBe('ACTIVE');
    expect(http.status).toBe(200);
    expect(await http.json()).toMatchObject({ stateMachineArn: ARN, status: 'ACTIVE' });
    expect(operations).toEqual(['DescribeStateMachine', 'DescribeStateMachine']);
    expect(overHttp()).toBe(1);
  });

  it('answers an operation error in process as the SDK expects it', async () => {
    const { client } = await start();

    const error = await client
      .send(new DescribeStateMachineCommand({ stateMachineArn: `${ARN}-gone` }))
      .catch((e: unknown) => e);

    expect(error).toBeInstanceOf(StateMachineDoesNotExist);
  });

  it('is no longer reachable, in process or not, once closed', async () => {
    const { client } = await start();
    await service?.close();
    service = undefined;

    await expect(client.send(new DescribeStateMachineCommand({ stateMachineArn: ARN }))).rejects.toThrow(
      /ECONNREFUSED/,
    );
  });
});
