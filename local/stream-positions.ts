import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { _Record } from '@aws-sdk/client-dynamodb-streams';
import type { DynamoDBStreamEvent } from 'aws-lambda';
import { z } from 'zod';

/** One function a stream feeds, with its own position: an event-source mapping in AWS. */
export interface StreamConsumer {
  /** Names it in the logs. */
  readonly name: string;
  /** Receives batches in the Lambda event shape; may report partial failures like the CDK mapping allows. */
  readonly handler: (event: DynamoDBStreamEvent) => Promise<unknown>;
  /** Where its position is kept, so a restart neither replays nor skips records. */
  readonly checkpointFile?: string;
}

/** How often at most a checkpoint file is written while records flow. */
const CHECKPOINT_EVERY_MS = 500;

/** A batch waiting for one function: the records it has not had, and the position after them. */
export interface Batch {
  readonly streamArn: string;
  readonly shardId: string;
  readonly records: readonly _Record[];
  readonly last: string;
}

const sequenceSchema = z.string().regex(/^\d+$/);

/** Stream sequence numbers are decimal strings of any length: compared as numbers. */
export const after = (sequence: string | undefined, checkpoint: string | undefined) =>
  sequence !== undefined && (checkpoint === undefined || BigInt(sequence) > BigInt(checkpoint));

/** A function's position per shard (kept in its checkpoint file) and the batches waiting for it. */
export class Position {
  shards: Record<string, string> = {};
  /** Per shard, the last record queued for the function (ahead of `shards` while batches wait). */
  queuedTo: Record<string, string> = {};
  readonly waiting: Batch[] = [];
  /** Set while the function works through `waiting`. */
  draining?: Promise<void>;
  private saving?: NodeJS.Timeout;

  constructor(
    readonly consumer: StreamConsumer,
    private readonly log?: (line: string) => void,
  ) {
    const file = consumer.checkpointFile;
    if (!file || !existsSync(file)) return;
    const stored = z.record(z.string(), z.unknown()).safeParse(JSON.parse(readFileSync(file, 'utf8')));
    for (const [shardId, at] of Object.entries(stored.success ? stored.data : {})) {
      const sequence = sequenceSchema.safeParse(at);
      if (sequence.success) this.shards[shardId] = sequence.data;
      else
        log?.(
          `stream mapping ${consumer.name}: checkpoint for ${shardId} is not a sequence number; reading the shard from its start`,
        );
    }
    if (!stored.success)
      log?.(`stream mapping ${consumer.name}: ${file} is not a checkpoint file; reading from the start`);
  }

  /**
   * Moves on, writing the file at most every `CHECKPOINT_EVERY_MS` (and at stop), not after every
   * batch: the write blocks the process. A crash delivers the batches since again, as a mapping in
   * AWS may; every consumer is idempotent.
   */
  advance(shardId: string, sequence: string): void {
    if (!after(sequence, this.shards[shardId])) return;
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

  /** Queues a batch; the records it holds are never queued again, whatever the reader reads. */
  queue(batch: Batch): void {
    this.waiting.push(batch);
    this.queuedTo[batch.shardId] = batch.last;
  }

  /** What the reader may skip in a shard: what was queued, or else what the checkpoint says was had. */
  seen(shardId: string): string | undefined {
    return this.queuedTo[shardId] ?? this.shards[shardId];
  }

  forget(shardId: string): void {
    const without = (record: Record<string, string>) =>
      Object.fromEntries(Object.entries(record).filter(([id]) => id !== shardId));
    this.shards = without(this.shards);
    this.queuedTo = without(this.queuedTo);
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
