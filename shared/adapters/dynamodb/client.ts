import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { clientConfig } from '../../config.js';

/** One document client per process, on the endpoint the configuration resolves. */
export const documentClient = DynamoDBDocumentClient.from(new DynamoDBClient(clientConfig('dynamodb')), {
  marshallOptions: { removeUndefinedValues: true },
});
