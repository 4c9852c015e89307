import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { DescribeTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  DescribeStreamCommand,
  DynamoDBStreamsClient,
  GetRecordsCommand,
  GetShardIteratorCommand,
  type _Record,
} from '@aws-sdk/client-dynamodb-streams';
import type { DynamoDBRecord, DynamoDBStreamEvent } from 'aws-lambda';
import { z } from 'zod';
import { withoutSdkLogging } from '../shared/adapters/aws-clients.js';

export interface StreamMappingOptions {
  readonly endpoint: string;
  readonly region: string;
  readonly tableName: string;
  /** Receives batches in the Lambda event shape; may report partial failures like the CDK mapping allows. */
  readonly handler: (event: DynamoDBStreamEvent) => Promise<unknown>;
  /** Where the mapping's position is kept, so a restart neither replays nor skips records. */
  readonly checkpointFile?: string;
  readonly batchSize?: number;
  readonly retryAttempts?: number;
  readonly pollMs?: number;
  readonly log?: (line: string) => void;
}

const batchResponse = z
  .object({ batchItemFailures: z.array(z.object({ itemIdentifier: z.string() })) })
  .partial()
  .nullish();

/** How often at most the checkpoint file is written while records flow. */
const CHECKPOINT_EVERY_MS = 500;

interface ShardReader {
  iterator: string | undefined;
  closed: boolean;
}

/**
 * The event-source mapping from a table's stream to a function, as the CDK stack declares it
 * (TRIM_HORIZON, batches of 100, 5 retries, partial batch responses): reads DynamoDB Local's
 * Streams API shard by shard, in order, and keeps its position in a checkpoint file.
 */
export class StreamMapping {
  private readonly streams: DynamoDBStreamsClient;
  private readonly dynamo: DynamoDBClient;
  private readonly readers = new Map<string, ShardReader>();
  private checkpoints: Record<string, string> = {};
  private running = false;
  private saving?: NodeJS.Timeout;
  private loop?: Promise<void>;
  /** Records delivered, for the health endpoint and tests. */
  delivered = 0;

  constructor(private readonly options: StreamMappingOptions) {
    const client = { endpoint: options.endpoint, region: options.region };
    this.streams = withoutSdkLogging(new DynamoDBStreamsClient(client));
    this.dynamo = withoutSdkLogging(new DynamoDBClient(client));
    if (options.checkpointFile && existsSync(options.checkpointFile))
      this.checkpoints = z
        .record(z.string(), z.string())
        .parse(JSON.parse(readFileSync(options.checkpointFile, 'utf8')));
  }

  async start(): Promise<void> {
    const { Table } = await this.dynamo.send(new DescribeTableCommand({ TableName: this.options.tableName }));
    const streamArn = Table?.LatestStreamArn;
    if (!streamArn) throw new Error(`table ${this.options.tableName} has no stream`);
    this.running = true;
    this.loop = this.run(streamArn);
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
    if (this.saving) this.writeCheckpoints();
    this.streams.destroy();
    this.dynamo.destroy();
  }

  private async run(streamArn: string): Promise<void> {
    let lastDiscovery = 0;
    while (this.running) {
      try {
        if (Date.now() - lastDiscovery > 5000 || this.readers.size === 0) {
          await this.discover(streamArn);
          lastDiscovery = Date.now();
        }
        let busy = false;
        for (const [shardId, reader] of this.readers) if (await this.poll(streamArn, shardId, reader)) busy = true;
        if (!busy) await sleep(this.options.pollMs ?? 100);
      } catch (error) {
        if (!this.running) return;
        this.options.log?.(`stream mapping: ${(error as Error).message}; retrying`);
        await sleep(1000);
      }
    }
  }

  private async discover(streamArn: string): Promise<void> {
    const { StreamDescription } = await this.streams.send(new DescribeStreamCommand({ StreamArn: streamArn }));
    for (const shard of StreamDescription?.Shards ?? []) {
      const shardId = shard.ShardId;
      if (!shardId || this.readers.has(shardId)) continue;
      // A child shard is read only once its parent is finished, which keeps records in order.
      const parent = shard.ParentShardId ? this.readers.get(shard.ParentShardId) : undefined;
      if (parent && !parent.closed) continue;
      this.readers.set(shardId, { iterator: await this.iterator(streamArn, shardId), closed: false });
    }
  }

  private async iterator(streamArn: string, shardId: string): Promise<string | undefined> {
    const after = this.checkpoints[shardId];
    try {
      const { ShardIterator } = await this.streams.send(
        new GetShardIteratorCommand({
          StreamArn: streamArn,
          ShardId: shardId,
          ...(after
            ? { ShardIteratorType: 'AFTER_SEQUENCE_NUMBER', SequenceNumber: after }
            : { ShardIteratorType: 'TRIM_HORIZON' }),
        }),
      );
      return ShardIterator;
    } catch (error) {
      if (!after) throw error;
      this.options.log?.(`stream mapping: checkpoint for ${shardId} is gone; reading the shard from its start`);
      this.checkpoints = Object.fromEntries(Object.entries(this.checkpoints).filter(([id]) => id !== shardId));
      return this.iterator(streamArn, shardId);
    }
  }

  /** Reads one batch from a shard and delivers it; true when there was something to deliver. */
  private async poll(streamArn: string, shardId: string, reader: ShardReader): Promise<boolean> {
    if (reader.closed || !reader.iterator) return false;
    let page;
    try {
      page = await this.streams.send(
        new GetRecordsCommand({ ShardIterator: reader.iterator, Limit: this.options.batchSize ?? 100 }),
      );
    } catch (error) {
      const name = (error as Error).name;
      if (name !== 'ExpiredIteratorException' && name !== 'TrimmedDataAccessException') throw error;
      // The iterator went stale: start again from the checkpoint.
      reader.iterator = await this.iterator(streamArn, shardId);
      return false;
    }
    const { Records = [], NextShardIterator } = page;
    if (Records.length > 0) await this.deliver(streamArn, Records);
    reader.iterator = NextShardIterator;
    if (!NextShardIterator) reader.closed = true;
    const last = Records.at(-1)?.dynamodb?.SequenceNumber;
    if (last) {
      this.checkpoints[shardId] = last;
      this.saveCheckpoints();
    }
    return Records.length > 0;
  }

  private async deliver(streamArn: string, records: readonly _Record[]): Promise<void> {
    let pending = records.map((r) => toLambdaRecord(r, streamArn, this.options.region));
    const attempts = this.options.retryAttempts ?? 5;
    for (let attempt = 0; attempt <= attempts && pending.length > 0; attempt++) {
      try {
        const response = batchResponse.parse(await this.options.handler({ Records: pending }));
        const failed = response?.batchItemFailures?.[0]?.itemIdentifier;
        const from = failed === undefined ? -1 : pending.findIndex((r) => r.dynamodb?.SequenceNumber === failed);
        this.delivered += from === -1 ? pending.length : from;
        pending = from === -1 ? [] : pending.slice(from);
      } catch (error) {
        this.options.log?.(`stream mapping: handler failed (${(error as Error).message}), attempt ${attempt + 1}`);
      }
      if (pending.length > 0) await sleep(Math.min(1000 * 2 ** attempt, 10_000));
    }
    if (pending.length > 0)
      this.options.log?.(`stream mapping: gave up on ${pending.length} record(s) after ${attempts} retries`);
  }

  /**
   * Writes the checkpoints at most every `CHECKPOINT_EVERY_MS` (and at stop), not after every
   * batch: the write blocks the process. A crash delivers the batches since again, as a mapping in
   * AWS may; every consumer is idempotent.
   */
  private saveCheckpoints(): void {
    if (!this.options.checkpointFile || this.saving) return;
    this.saving = setTimeout(() => {
      try {
        this.writeCheckpoints();
      } catch (error) {
        // Kept in memory: the next batch tries again.
        this.options.log?.(`stream mapping: checkpoint not written (${(error as Error).message})`);
      }
    }, CHECKPOINT_EVERY_MS);
  }

  private writeCheckpoints(): void {
    clearTimeout(this.saving);
    this.saving = undefined;
    const file = this.options.checkpointFile;
    if (!file) return;
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(`${file}.tmp`, JSON.stringify(this.checkpoints));
    renameSync(`${file}.tmp`, file);
  }
}

function toLambdaRecord(record: _Record, streamArn: string, region: string): DynamoDBRecord {
  const d = record.dynamodb;
  return {
    eventID: record.eventID,
    eventName: record.eventName,
    eventVersion: record.eventVersion ?? '1.1',
    eventSource: 'aws:dynamodb',
    awsRegion: region,
    eventSourceARN: streamArn,
    dynamodb: {
      ApproximateCreationDateTime: d?.ApproximateCreationDateTime
        ? Math.floor(d.ApproximateCreationDateTime.getTime() / 1000)
        : undefined,
      Keys: d?.Keys,
      NewImage: d?.NewImage,
      OldImage: d?.OldImage,
      SequenceNumber: d?.SequenceNumber,
      SizeBytes: d?.SizeBytes,
      StreamViewType: d?.StreamViewType,
    },
  } as DynamoDBRecord;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
