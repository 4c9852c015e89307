/**
 * The DynamoDB tables, described once as data: the CDK stack builds them from this,
 * and the local stack creates the same tables in DynamoDB Local.
 */
export type AttributeType = 'S' | 'N';

export interface KeySpec {
  readonly name: string;
  readonly type: AttributeType;
}

export interface TableSpec {
  /** Construct id in the stack and suffix of the local table name. */
  readonly id: string;
  readonly partitionKey: KeySpec;
  readonly sortKey?: KeySpec;
  readonly globalIndexes: ReadonlyArray<{
    readonly name: string;
    readonly partitionKey: KeySpec;
    readonly sortKey?: KeySpec;
  }>;
  /** Streams NEW_IMAGE records to consumers when set. */
  readonly stream: boolean;
  readonly ttlAttribute?: string;
}

const pk: KeySpec = { name: 'pk', type: 'S' };
const sk: KeySpec = { name: 'sk', type: 'S' };

export const TABLES = {
  /**
   * Single-table store for runs, step executions, step aggregates, approvals, runbooks,
   * idempotency records, workers, leases, receipts, inventory and quotas.
   * gsi1: listings by tenant (runs by time, runbooks by id); gsi2: leases by owner, workers by profile.
   */
  state: {
    id: 'State',
    partitionKey: pk,
    sortKey: sk,
    globalIndexes: [
      { name: 'gsi1', partitionKey: { name: 'gsi1pk', type: 'S' }, sortKey: { name: 'gsi1sk', type: 'S' } },
      { name: 'gsi2', partitionKey: { name: 'gsi2pk', type: 'S' }, sortKey: { name: 'gsi2sk', type: 'S' } },
    ],
    stream: false,
    ttlAttribute: 'expiresAt',
  },
  /** The append-only event log: one partition per run, ordered by seq; its stream feeds the broadcaster. */
  events: {
    id: 'Events',
    partitionKey: { name: 'runId', type: 'S' },
    sortKey: { name: 'seq', type: 'N' },
    globalIndexes: [],
    stream: true,
  },
  /** WebSocket connections and their run subscriptions; expired connections age out by TTL. */
  connections: {
    id: 'Connections',
    partitionKey: pk,
    sortKey: sk,
    globalIndexes: [],
    stream: false,
    ttlAttribute: 'expiresAt',
  },
} as const satisfies Record<string, TableSpec>;

export type TableKey = keyof typeof TABLES;
