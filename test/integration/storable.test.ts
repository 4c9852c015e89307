import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRunBodySchema } from '../../shared/app/runs.js';
import type { Json } from '../../shared/domain/canonical.js';
import { MAX_INPUTS_BYTES, MAX_JSON_DEPTH } from '../../shared/domain/storable.js';
import { startTestDynamo, type TestDynamo } from '../support/local-dynamodb.js';

let dynamo: TestDynamo;
let client: DynamoDBDocumentClient;

beforeAll(async () => {
  dynamo = await startTestDynamo('storable');
  client = DynamoDBDocumentClient.from(new DynamoDBClient({ endpoint: dynamo.local.endpoint, region: 'us-east-1' }));
});

afterAll(async () => {
  client?.destroy();
  await dynamo?.local.stop();
});

/** Values at the edges of what the schema accepts: extreme numbers, odd text, deep nesting. */
const edgy: fc.Arbitrary<Json> = fc.letrec<{ node: Json }>((tie) => ({
  node: fc.oneof(
    { depthSize: 'small' },
    fc.constantFrom<Json>(9007199254740991, -9007199254740991, 1e-130, 9.99e125, 0.1, '\u{10FFFF}', '\uFFFD', '🙂', ''),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.string({ unit: 'grapheme', maxLength: 20 }),
    fc.array(tie('node'), { maxLength: 3 }),
    fc.dictionary(fc.string({ minLength: 1, maxLength: 8 }), tie('node'), { maxKeys: 3 }),
  ),
})).node;

function nested(levels: number): Json {
  let value: Json = 'bottom';
  for (let i = 0; i < levels; i++) value = { k: value };
  return value;
}

describe('inputs the create-run schema accepts', () => {
  it('are stored by DynamoDB Local exactly, nested as a run item nests them', async () => {
    const samples = fc.sample(fc.dictionary(fc.stringMatching(/^[a-z]{1,6}$/), edgy, { maxKeys: 4 }), {
      seed: 42,
      numRuns: 60,
    });
    samples.push({ deep: nested(MAX_JSON_DEPTH - 1) }, { big: 'x'.repeat(MAX_INPUTS_BYTES - 100) });
    let stored = 0;
    for (const [i, inputs] of samples.entries()) {
      const parsed = createRunBodySchema.safeParse({ runbookId: 'r', inputs });
      if (!parsed.success) continue;
      const Key = { pk: `STORABLE#${i}`, sk: 'META' };
      // The run item holds its inputs under `run`, as the run store writes them.
      await client.send(
        new PutCommand({ TableName: dynamo.tableNames.state, Item: { ...Key, run: { inputs: parsed.data.inputs } } }),
      );
      const { Item } = await client.send(new GetCommand({ TableName: dynamo.tableNames.state, Key }));
      expect((Item?.run as { inputs: unknown }).inputs).toEqual(parsed.data.inputs);
      stored += 1;
    }
    expect(stored).toBeGreaterThan(20);
  });
});
