import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { DescribeTableCommand, DynamoDBClient, TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import { DescribeStreamCommand, DynamoDBStreamsClient } from '@aws-sdk/client-dynamodb-streams';
import { DynamoDBDocumentClient, GetCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import type { DynamoDBRecord, DynamoDBStreamEvent } from 'aws-lambda';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { DATABASE_FILE, startDynamoDbLocal } from '../../local/dynamodb-local.js';
import type { StreamConsumer } from '../../local/stream-positions.js';
import { StreamMapping } from '../../local/streams.js';
import { ensureTables } from '../../shared/adapters/dynamodb/tables.js';
import { TABLES } from '../../shared/resources/tables.js';
import { freePort, startTestDynamo, type TestDynamo } from '../support/local-dynamodb.js';
import { until } from '../support/stack-api.js';

const region = 'us-east-1';
const credentials = { accessKeyId: 'local', secretAccessKey: 'local' };

describe('DynamoDB Local: transactions and the event-log stream', () => {
  let dynamo: TestDynamo;
  let doc: DynamoDBDocumentClient;
  beforeAll(async () => {
    dynamo = await startTestDynamo('svc');
    doc = DynamoDBDocumentClient.from(new DynamoDBClient({ endpoint: dynamo.local.endpoint, region, credentials }));
  });
  afterAll(async () => {
    await dynamo?.local.stop();
  });

  /** Appends an item to the event log, in a transaction as the run store does. */
  const putEvent = (runId: string, seq: number, type = 'x') =>
    doc.send(
      new TransactWriteCommand({
        TransactItems: [{ Put: { TableName: dynamo.tableNames.events, Item: { runId, seq, type } } }],
      }),
    );
  /** The seqs of one run's records in a batch, in order. */
  const seqsOf = (runId: string, event: DynamoDBStreamEvent) =>
    event.Records.filter((r: DynamoDBRecord) => r.dynamodb?.NewImage?.runId?.S === runId).map((r) =>
      Number(r.dynamodb?.NewImage?.seq?.N),
    );
  /** The record of one run's `seq` in a batch. */
  const recordOf = (runId: string, seq: number, event: DynamoDBStreamEvent) =>
    event.Records.find((r) => r.dynamodb?.NewImage?.runId?.S === runId && r.dynamodb.NewImage.seq?.N === String(seq));
  /** A mapping of the event log's stream that polls often. */
  const mappingOf = (consumers: StreamConsumer[], log?: (line: string) => void) =>
    new StreamMapping({
      endpoint: dynamo.local.endpoint,
      region,
      tableName: dynamo.tableNames.events,
      pollMs: 20,
      consumers,
      ...(log && { log }),
    });

  it('commits a state change and its event together, or neither', async () => {
    const { state, events } = dynamo.tableNames;
    const write = (seq: number, status: string) =>
      doc.send(
        new TransactWriteCommand({
          TransactItems: [
            { Put: { TableName: state, Item: { pk: 'RUN#r1', sk: 'META', status } } },
            {
              Put: {
                TableName: events,
                Item: { runId: 'r1', seq, type: `run.${status}` },
                ConditionExpression: 'attribute_not_exists(seq)',
              },
            },
          ],
        }),
      );
    await write(1, 'created');
    // The same seq again: the condition fails, so the state write is rolled back with it.
    await expect(write(1, 'running')).rejects.toBeInstanceOf(TransactionCanceledException);
    const { Item } = await doc.send(new GetCommand({ TableName: state, Key: { pk: 'RUN#r1', sk: 'META' } }));
    expect(Item?.status).toBe('created');
  });

  it('delivers new event-log items through the Streams API in order, and resumes from its checkpoint', async () => {
    const checkpointFile = join(mkdtempSync(join(tmpdir(), 'capstan-stream-')), 'events.json');
    const mappingTo = (handler: StreamConsumer['handler']) => mappingOf([{ name: 'test', handler, checkpointFile }]);
    const seen: number[] = [];
    let failOnce = true;
    const mapping = mappingTo(async (event) => {
      const seqs = seqsOf('r2', event);
      // A partial batch failure is retried from the failed record, as the CDK mapping's setting says.
      if (failOnce && seqs.includes(3)) {
        failOnce = false;
        const failed = recordOf('r2', 3, event);
        seen.push(...seqs.filter((s) => s < 3));
        return { batchItemFailures: [{ itemIdentifier: failed?.dynamodb?.SequenceNumber ?? '' }] };
      }
      seen.push(...seqs);
      return { batchItemFailures: [] };
    });
    await mapping.start();
    for (let seq = 1; seq <= 5; seq++) await putEvent('r2', seq, 'step.output');
    await until('five stream records', async () => (seen.length >= 5 ? true : undefined));
    await mapping.stop();
    expect(seen).toEqual([1, 2, 3, 4, 5]);
    expect(Object.keys(JSON.parse(readFileSync(checkpointFile, 'utf8')) as object).length).toBeGreaterThan(0);

    // A new mapping with the same checkpoint sees only what was written after.
    const later: number[] = [];
    const resumed = mappingTo(async (event) => {
      later.push(...event.Records.map((r) => Number(r.dynamodb?.NewImage?.seq?.N)));
    });
    await resumed.start();
    await putEvent('r2', 6);
    await until('the record written after the restart', async () => (later.length >= 1 ? true : undefined));
    await resumed.stop();
    expect(later).toEqual([6]);
  });
  it('reads the stream once for several functions, each at its own position and with its own retries', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'capstan-stream-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const runId = 'r3';
    const files = { steady: join(dir, 'steady.json'), flaky: join(dir, 'flaky.json') };
    const seen = { steady: [] as number[], flaky: [] as number[] };
    let failOnce = true;
    const sequenceOf = new Map<number, string>();
    const steady: StreamConsumer = {
      name: 'steady',
      checkpointFile: files.steady,
      handler: async (event) => {
        const seqs = seqsOf(runId, event);
        for (const seq of seqs) sequenceOf.set(seq, recordOf(runId, seq, event)?.dynamodb?.SequenceNumber ?? '');
        seen.steady.push(...seqs);
      },
    };
    const flaky: StreamConsumer = {
      name: 'flaky',
      checkpointFile: files.flaky,
      handler: async (event) => {
        const seqs = seqsOf(runId, event);
        if (failOnce && seqs.includes(2)) {
          // Fails from its second record: only it is delivered those again.
          failOnce = false;
          seen.flaky.push(...seqs.filter((s) => s < 2));
          const failed = recordOf(runId, 2, event);
          return { batchItemFailures: [{ itemIdentifier: failed?.dynamodb?.SequenceNumber ?? '' }] };
        }
        seen.flaky.push(...seqs);
        return { batchItemFailures: [] };
      },
    };
    const both = mappingOf([steady, flaky]);
    await both.start();
    for (let seq = 1; seq <= 3; seq++) await putEvent(runId, seq);
    await until('three records to each', async () =>
      seen.steady.length >= 3 && seen.flaky.length >= 3 ? true : undefined,
    );
    await both.stop();
    expect(seen).toEqual({ steady: [1, 2, 3], flaky: [1, 2, 3] });

    // The flaky function's position is set back to before its second record; the steady one's is not.
    const checkpoints = z.record(z.string(), z.string());
    const flakyAt = checkpoints.parse(JSON.parse(readFileSync(files.flaky, 'utf8')));
    const steadyAt = checkpoints.parse(JSON.parse(readFileSync(files.steady, 'utf8')));
    expect(flakyAt).toEqual(steadyAt);
    await putEvent(runId, 4);
    const shard = Object.entries(flakyAt).find(([, at]) => at === sequenceOf.get(3))?.[0] ?? '';
    writeFileSync(files.flaky, JSON.stringify({ ...flakyAt, [shard]: sequenceOf.get(1) }));
    seen.steady.length = 0;
    seen.flaky.length = 0;
    const resumed = mappingOf([steady, flaky]);
    await resumed.start();
    await until('the records after each position', async () =>
      seen.steady.length >= 1 && seen.flaky.length >= 3 ? true : undefined,
    );
    await resumed.stop();
    expect(seen).toEqual({ steady: [4], flaky: [2, 3, 4] });
  });
  it('keeps feeding the other functions while one is stuck on a batch, and then feeds it what it missed, in order', async () => {
    const runId = 'r4';
    const seen = { quick: [] as number[], stuck: [] as number[] };
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    const mapping = mappingOf([
      { name: 'quick', handler: async (event) => void seen.quick.push(...seqsOf(runId, event)) },
      {
        name: 'stuck',
        handler: async (event) => {
          const seqs = seqsOf(runId, event);
          if (seqs.includes(1)) await released;
          seen.stuck.push(...seqs);
        },
      },
    ]);
    await mapping.start();
    try {
      for (let seq = 1; seq <= 3; seq++) {
        await putEvent(runId, seq);
        // Each record in a batch of its own.
        await until(`record ${seq} to the quick function`, async () => (seen.quick.includes(seq) ? true : undefined));
      }
      expect(seen).toEqual({ quick: [1, 2, 3], stuck: [] });
      release();
      await until('the stuck function to catch up', async () => (seen.stuck.length >= 3 ? true : undefined));
    } finally {
      release();
      await mapping.stop();
    }
    expect(seen).toEqual({ quick: [1, 2, 3], stuck: [1, 2, 3] });
  });
  it("stops without waiting out a failing function's back-off, and delivers that batch again at the next start", async () => {
    const runId = 'r6';
    const checkpointFile = join(mkdtempSync(join(tmpdir(), 'capstan-stream-')), 'down.json');
    onTestFinished(() => rmSync(dirname(checkpointFile), { recursive: true, force: true }));
    const failures: number[] = [];
    const log: string[] = [];
    const down = mappingOf(
      [
        {
          name: 'down',
          checkpointFile,
          handler: async (event) => {
            failures.push(...seqsOf(runId, event));
            throw new Error('the bus is down');
          },
        },
      ],
      (line) => log.push(line),
    );
    await down.start();
    await putEvent(runId, 1);
    await until('the first failure', async () => (failures.length > 0 ? true : undefined));
    const stopping = Date.now();
    await down.stop();
    // Its retries would back off for 25 s in all; the stop ends the one under way.
    expect(Date.now() - stopping).toBeLessThan(10_000);
    expect(log.some((line) => /down: stopped with \d+ record\(s\) to retry/.test(line))).toBe(true);
    expect(log.some((line) => line.includes('gave up'))).toBe(false);

    const delivered: number[] = [];
    const up = mappingOf([
      { name: 'down', checkpointFile, handler: async (e) => void delivered.push(...seqsOf(runId, e)) },
    ]);
    await up.start();
    await until('the batch again', async () => (delivered.includes(1) ? true : undefined));
    await up.stop();
    expect(delivered).toEqual([1]);
  });
  it('reads from the start past a checkpoint that holds no sequence number, rather than stalling', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'capstan-stream-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const checkpointFile = join(dir, 'broken.json');
    // Every shard the stream has holds something that is not a position.
    const client = { endpoint: dynamo.local.endpoint, region, credentials };
    const ddb = new DynamoDBClient(client);
    const streams = new DynamoDBStreamsClient(client);
    onTestFinished(() => {
      ddb.destroy();
      streams.destroy();
    });
    const { Table } = await ddb.send(new DescribeTableCommand({ TableName: dynamo.tableNames.events }));
    const { StreamDescription } = await streams.send(new DescribeStreamCommand({ StreamArn: Table?.LatestStreamArn }));
    const shards = (StreamDescription?.Shards ?? []).map((shard) => [shard.ShardId, 'not-a-number']);
    expect(shards.length).toBeGreaterThan(0);
    writeFileSync(checkpointFile, JSON.stringify(Object.fromEntries(shards)));
    await putEvent('r5', 1);
    const logged: string[] = [];
    const seen: number[] = [];
    const mapping = mappingOf(
      [{ name: 'reader', checkpointFile, handler: async (event) => void seen.push(...seqsOf('r5', event)) }],
      (line) => logged.push(line),
    );
    await mapping.start();
    try {
      await until('the record past the broken checkpoint', async () => (seen.length >= 1 ? true : undefined));
    } finally {
      await mapping.stop();
    }
    expect(seen).toEqual([1]);
    expect(logged.join('\n')).toContain('is not a sequence number');
  });
});

describe('DynamoDB Local on disk', () => {
  const journalMode = (file: string) => {
    const db = new DatabaseSync(file);
    try {
      return (db.prepare('PRAGMA journal_mode').get() as { journal_mode: string }).journal_mode;
    } finally {
      db.close();
    }
  };

  it("keeps its database in SQLite's write-ahead log, converting one made before, and keeps the data across a restart", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'capstan-ddb-'));
    onTestFinished(() => rmSync(dataDir, { recursive: true, force: true }));
    const file = join(dataDir, DATABASE_FILE);
    // A database from before: SQLite's default rollback journal.
    const before = new DatabaseSync(file);
    before.exec('PRAGMA journal_mode=DELETE; CREATE TABLE kept (x); DROP TABLE kept;');
    before.close();
    expect(journalMode(file)).toBe('delete');

    const names = { state: 'disk-state', events: 'disk-events', connections: 'disk-connections' };
    const start = async () => {
      const local = await startDynamoDbLocal({ port: await freePort(), dataDir });
      const doc = DynamoDBDocumentClient.from(new DynamoDBClient({ endpoint: local.endpoint, region, credentials }));
      return { local, doc };
    };
    const first = await start();
    try {
      process.env.AWS_REGION ??= region;
      process.env.AWS_ACCESS_KEY_ID ??= credentials.accessKeyId;
      process.env.AWS_SECRET_ACCESS_KEY ??= credentials.secretAccessKey;
      await ensureTables(first.local.endpoint, TABLES, names);
      await first.doc.send(
        new TransactWriteCommand({
          TransactItems: [{ Put: { TableName: names.state, Item: { pk: 'RUN#kept', sk: 'META', status: 'created' } } }],
        }),
      );
    } finally {
      first.doc.destroy();
      await first.local.stop();
    }
    expect(journalMode(file)).toBe('wal');

    const second = await start();
    try {
      const { Item } = await second.doc.send(
        new GetCommand({ TableName: names.state, Key: { pk: 'RUN#kept', sk: 'META' }, ConsistentRead: true }),
      );
      expect(Item?.status).toBe('created');
    } finally {
      second.doc.destroy();
      await second.local.stop();
    }
  }, 60_000);
});
