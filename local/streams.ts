import { DescribeTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  DescribeStreamCommand,
  DynamoDBStreamsClient,
  GetRecordsCommand,
  GetShardIteratorCommand,
  type _Record,
} from '@aws-sdk/client-dynamodb-streams';
import type { DynamoDBRecord } from 'aws-lambda';
import { z } from 'zod';
import { withoutSdkLogging } from '../shared/adapters/aws-clients.js';
import { after, Position, type StreamConsumer } from './stream-positions.js';

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

/**
 * Batches a function may have waiting before the reader stops reading for everyone: a function
 * that keeps failing holds the others up only once it is this far behind.
 */
const MAX_WAITING_BATCHES = 50;

interface ShardReader {
  iterator: string | undefined;
  closed: boolean;
}

/**
 * The event-source mappings from a table's stream to its functions, as the CDK stack declares each
 * (TRIM_HORIZON, batches of 100, 5 retries, partial batch responses): reads DynamoDB Local's Streams
 * API shard by shard, in order, and keeps each function's position in its own checkpoint file.
 *
 * One reader serves every function of the stream: each batch is read once and queued for each
 * function that has not had it yet, and each function works through its own queue. In AWS each
 * mapping polls on its own; here three pollers cost DynamoDB Local about three times the CPU for
 * the same records. What each function sees is the same (every record once, in order per shard,
 * retried from a partial failure), and a function that fails or is slow holds the others up only
 * once `MAX_WAITING_BATCHES` batches wait for it.
 */
export class StreamMapping {
  private readonly streams: DynamoDBStreamsClient;
  private readonly dynamo: DynamoDBClient;
  private readonly readers = new Map<string, ShardReader>();
  private readonly positions: Position[];
  private running = false;
  private loop?: Promise<void>;
  /** Settles when `stop` is called, so a retry's back-off ends at once. */
  private stopping!: Promise<void>;
  private stopped: () => void = () => undefined;
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
    this.stopping = new Promise((resolve) => (this.stopped = resolve));
    this.loop = this.run(streamArn);
  }

  /**
   * Stops reading; the batches already read are delivered before it returns, except from the
   * first that fails for a function: that one and its successors stay for the next start (the
   * function's checkpoint is before them), so a stop never waits out the retries' back-off.
   */
  async stop(): Promise<void> {
    this.running = false;
    this.stopped();
    await this.loop;
    await Promise.all(this.positions.map((p) => p.draining));
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
    const earliest = held.includes(undefined) ? undefined : held.reduce((a, b) => (after(a, b) ? b : a), held[0]);
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
      // Only the service refusing the position (trimmed, or a shard it no longer has) moves it; a
      // service that cannot be reached is tried again as it is.
      const refused = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 400;
      if (!earliest || !refused) throw error;
      this.options.log?.(`stream mapping: position ${earliest} in ${shardId} is gone; trying the next one back`);
      // The functions at that position read the shard from its start; the others keep theirs.
      for (const position of this.positions) if (position.shards[shardId] === earliest) position.forget(shardId);
      return this.iterator(streamArn, shardId);
    }
  }

  /** Reads one batch from a shard and queues it for each function; true when there were records. */
  private async poll(streamArn: string, shardId: string, reader: ShardReader): Promise<boolean> {
    if (reader.closed || !reader.iterator) return false;
    // A function this far behind holds the reading up, so nothing waits in memory without bound.
    if (this.positions.some((p) => p.waiting.length >= MAX_WAITING_BATCHES)) return false;
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
    if (last)
      for (const position of this.positions) {
        // A function further on (its checkpoint was newer, or the reader started again from an
        // older one) skips what it had or has waiting.
        const records = Records.filter((r) => after(r.dynamodb?.SequenceNumber, position.seen(shardId)));
        if (records.length === 0) continue;
        position.queue({ streamArn, shardId, records, last });
        position.draining ??= this.drain(position);
      }
    reader.iterator = NextShardIterator;
    if (!NextShardIterator) reader.closed = true;
    return Records.length > 0;
  }

  /** Hands a function its waiting batches, one at a time and in order. */
  private async drain(position: Position): Promise<void> {
    try {
      for (let batch = position.waiting[0]; batch; batch = position.waiting[0]) {
        // Left for the next start: the checkpoint stays before this batch.
        if (!(await this.deliver(position.consumer, batch.streamArn, batch.records))) return;
        position.advance(batch.shardId, batch.last);
        position.waiting.shift();
      }
    } finally {
      position.draining = undefined;
    }
  }

  /**
   * Delivers a batch with the mapping's retries; never throws (a batch given up on is logged).
   * False when the mapping stopped with the batch still failing: it is neither delivered nor given up on.
   */
  private async deliver(consumer: StreamConsumer, streamArn: string, records: readonly _Record[]): Promise<boolean> {
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
      if (pending.length === 0 || attempt === attempts) continue;
      if (!this.running) {
        this.options.log?.(`stream mapping ${consumer.name}: stopped with ${pending.length} record(s) to retry`);
        return false;
      }
      await this.backOff(Math.min(1000 * 2 ** attempt, 10_000));
    }
    if (pending.length > 0)
      this.options.log?.(
        `stream mapping ${consumer.name}: gave up on ${pending.length} record(s) after ${attempts} retries`,
      );
    return true;
  }

  /** Waits `ms` before a retry, or until the mapping stops, whichever comes first. */
  private async backOff(ms: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([new Promise((resolve) => (timer = setTimeout(resolve, ms))), this.stopping]);
    clearTimeout(timer);
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
