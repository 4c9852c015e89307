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

/** One function a stream feeds, with its own position: an event-source mapping in AWS. */
export interface StreamConsumer {
  /** Names it in the logs. */
  readonly name: string;
  /** Receives batches in the Lambda event shape; may report partial failures like the CDK mapping allows. */
  readonly handler: (event: DynamoDBStreamEvent) => Promise<unknown>;
  /** Where its position is kept, so a restart neither replays nor skips records. */
  readonly checkpointFile?: string;
}

export interface StreamMappingOptions {
  readonly endpoint: string;
  readonly region: string;
  readonly tableName: string;
  /** The functions the table's stream feeds, each as its own mapping would. */
  readonly consumers: readonly StreamConsumer[];
  readonly batchSize?: number;
  readonly retryAttempts?: number;
  readonly pollMs?: number;
  readonly log?: (line: string) => void;
}

const batchResponse = z
  .object({ batchItemFailures: z.array(z.object({ itemIdentifier: z.string() })) })
  .partial()
  .nullish();

/** How often at most a checkpoint file is written while records flow. */
const CHECKPOINT_EVERY_MS = 500;

interface ShardReader {
  iterator: string | undefined;
  closed: boolean;
}

/** Stream sequence numbers are decimal strings of any length: compared as numbers. */
const after = (sequence: string | undefined, checkpoint: string | undefined) =>
  sequence !== undefined && (checkpoint === undefined || BigInt(sequence) > BigInt(checkpoint));

/** A consumer's position per shard, kept in its checkpoint file. */
class Position {
  shards: Record<string, string> = {};
  private saving?: NodeJS.Timeout;

  constructor(
    readonly consumer: StreamConsumer,
    private readonly log?: (line: string) => void,
  ) {
    const file = consumer.checkpointFile;
    if (file && existsSync(file))
      this.shards = z.record(z.string(), z.string()).parse(JSON.parse(readFileSync(file, 'utf8')));
  }

  /**
   * Moves on, writing the file at most every `CHECKPOINT_EVERY_MS` (and at stop), not after every
   * batch: the write blocks the process. A crash delivers the batches since again, as a mapping in
   * AWS may; every consumer is idempotent.
   */
  advance(shardId: string, sequence: string): void {
    this.shards[shardId] = sequence;
    if (!this.consumer.checkpointFile || this.saving) return;
    this.saving = setTimeout(() => {
      try {
        this.write();
      } catch (error) {
        // Kept in memory: the next batch tries again.
        this.log?.(`stream mapping ${this.consumer.name}: checkpoint not written (${(error as Error).message})`);
      }
    }, CHECKPOINT_EVERY_MS);
  }

  forget(shardId: string): void {
    this.shards = Object.fromEntries(Object.entries(this.shards).filter(([id]) => id !== shardId));
  }

  flush(): void {
    if (this.saving) this.write();
  }

  private write(): void {
    clearTimeout(this.saving);
    this.saving = undefined;
    const file = this.consumer.checkpointFile;
    if (!file) return;
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(`${file}.tmp`, JSON.stringify(this.shards));
    renameSync(`${file}.tmp`, file);
  }
}

/**
 * The event-source mappings from a table's stream to its functions, as the CDK stack declares each
 * (TRIM_HORIZON, batches of 100, 5 retries, partial batch responses): reads DynamoDB Local's Streams
 * API shard by shard, in order, and keeps each function's position in its own checkpoint file.
 *
 * One reader serves every function of the stream: each batch is read once and handed to each
 * function that has not had it yet, side by side. In AWS each mapping polls on its own; here three
 * pollers cost DynamoDB Local about three times the CPU for the same records. What each function
 * sees is the same (every record once, in order per shard, retried from a partial failure), except
 * that the reader moves on when the slowest of them is done with a batch.
 */
export class StreamMapping {
  private readonly streams: DynamoDBStreamsClient;
  private readonly dynamo: DynamoDBClient;
  private readonly readers = new Map<string, ShardReader>();
  private readonly positions: Position[];
  private running = false;
  private loop?: Promise<void>;
  /** Records delivered, counted once per function, for the health endpoint and tests. */
  delivered = 0;

  constructor(private readonly options: StreamMappingOptions) {
    const client = { endpoint: options.endpoint, region: options.region };
    this.streams = withoutSdkLogging(new DynamoDBStreamsClient(client));
    this.dynamo = withoutSdkLogging(new DynamoDBClient(client));
    if (options.consumers.length === 0) throw new Error(`the stream of ${options.tableName} feeds no function`);
    this.positions = options.consumers.map((consumer) => new Position(consumer, options.log));
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
    for (const position of this.positions) position.flush();
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

  /** From the earliest position any function has in the shard: the shard's start if one has none. */
  private async iterator(streamArn: string, shardId: string): Promise<string | undefined> {
    const held = this.positions.map((p) => p.shards[shardId]);
    const earliest = held.includes(undefined)
      ? undefined
      : held.reduce((a, b) => (a !== undefined && b !== undefined && BigInt(b) < BigInt(a) ? b : a));
    try {
      const { ShardIterator } = await this.streams.send(
        new GetShardIteratorCommand({
          StreamArn: streamArn,
          ShardId: shardId,
          ...(earliest
            ? { ShardIteratorType: 'AFTER_SEQUENCE_NUMBER', SequenceNumber: earliest }
            : { ShardIteratorType: 'TRIM_HORIZON' }),
        }),
      );
      return ShardIterator;
    } catch (error) {
      if (!earliest) throw error;
      this.options.log?.(`stream mapping: checkpoint for ${shardId} is gone; reading the shard from its start`);
      for (const position of this.positions) position.forget(shardId);
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
      // The iterator went stale: start again from the checkpoints.
      reader.iterator = await this.iterator(streamArn, shardId);
      return false;
    }
    const { Records = [], NextShardIterator } = page;
    const last = Records.at(-1)?.dynamodb?.SequenceNumber;
    if (Records.length > 0)
      await Promise.all(
        this.positions.map(async (position) => {
          // A function whose position is further on (its checkpoint was newer) skips what it had.
          const unseen = Records.filter((r) => after(r.dynamodb?.SequenceNumber, position.shards[shardId]));
          if (unseen.length > 0) await this.deliver(position.consumer, streamArn, unseen);
          if (last && after(last, position.shards[shardId])) position.advance(shardId, last);
        }),
      );
    reader.iterator = NextShardIterator;
    if (!NextShardIterator) reader.closed = true;
    return Records.length > 0;
  }

  private async deliver(consumer: StreamConsumer, streamArn: string, records: readonly _Record[]): Promise<void> {
    let pending = records.map((r) => toLambdaRecord(r, streamArn, this.options.region));
    const attempts = this.options.retryAttempts ?? 5;
    for (let attempt = 0; attempt <= attempts && pending.length > 0; attempt++) {
      try {
        const response = batchResponse.parse(await consumer.handler({ Records: pending }));
        const failed = response?.batchItemFailures?.[0]?.itemIdentifier;
        const from = failed === undefined ? -1 : pending.findIndex((r) => r.dynamodb?.SequenceNumber === failed);
        this.delivered += from === -1 ? pending.length : from;
        pending = from === -1 ? [] : pending.slice(from);
      } catch (error) {
        this.options.log?.(
          `stream mapping ${consumer.name}: handler failed (${(error as Error).message}), attempt ${attempt + 1}`,
        );
      }
      if (pending.length > 0) await sleep(Math.min(1000 * 2 ** attempt, 10_000));
    }
    if (pending.length > 0)
      this.options.log?.(
        `stream mapping ${consumer.name}: gave up on ${pending.length} record(s) after ${attempts} retries`,
      );
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
