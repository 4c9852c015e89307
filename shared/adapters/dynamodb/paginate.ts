import { type DynamoDBDocumentClient, QueryCommand, type QueryCommandInput } from '@aws-sdk/lib-dynamodb';

/**
 * Runs a Query page after page and parses each item, until the index ends or `limit` items were
 * found. Resolves the items and the key to continue from, when the limit stopped it early.
 */
export async function queryPages<T>(
  client: DynamoDBDocumentClient,
  input: Omit<QueryCommandInput, 'ExclusiveStartKey' | 'Limit'>,
  parse: (item: Record<string, unknown>) => T,
  options: { limit?: number; startKey?: Record<string, unknown> } = {},
): Promise<{ items: T[]; lastKey?: Record<string, unknown> }> {
  const items: T[] = [];
  const limit = options.limit ?? Number.POSITIVE_INFINITY;
  let startKey = options.startKey;
  do {
    const page = await client.send(
      new QueryCommand({
        ...input,
        ...(Number.isFinite(limit) && { Limit: limit - items.length }),
        ExclusiveStartKey: startKey,
      }),
    );
    for (const item of page.Items ?? []) items.push(parse(item));
    startKey = page.LastEvaluatedKey;
  } while (startKey && items.length < limit);
  return { items, ...(startKey && { lastKey: startKey }) };
}
