import { DescribeTableCommand } from '@aws-sdk/client-dynamodb';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';

export interface ComponentHealth {
  readonly status: 'ok' | 'unavailable';
  readonly latencyMs: number;
  readonly detail?: string;
}

/** Whether the table answers, and how fast. */
export async function checkTable(client: DynamoDBDocumentClient, tableName: string): Promise<ComponentHealth> {
  const started = performance.now();
  try {
    const { Table } = await client.send(new DescribeTableCommand({ TableName: tableName }));
    const latencyMs = Math.round(performance.now() - started);
    return Table?.TableStatus === 'ACTIVE'
      ? { status: 'ok', latencyMs }
      : { status: 'unavailable', latencyMs, detail: `table is ${Table?.TableStatus}` };
  } catch (error) {
    return { status: 'unavailable', latencyMs: Math.round(performance.now() - started), detail: (error as Error).name };
  }
}
