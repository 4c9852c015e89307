import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { dynamoDbClient } from '../aws-clients.js';

/** One document client per process, on the endpoint the configuration resolves. */
export const documentClient = DynamoDBDocumentClient.from(dynamoDbClient(), {
  marshallOptions: { removeUndefinedValues: true },
});
