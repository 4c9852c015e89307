import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

const eslint = new ESLint();

/** The rule ids ESLint reports for `code` as if it were the file at `filePath`. */
async function violations(filePath: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath });
  return (result?.messages ?? []).map((m) => m.ruleId ?? m.message);
}

describe('the layering lint rules', () => {
  it('rejects the AWS SDK in the domain', async () => {
    const found = await violations(
      'shared/domain/x.ts',
      "import { DynamoDBClient } from '@aws-sdk/client-dynamodb';\nexport const client = new DynamoDBClient({});\n",
    );
    expect(found).toContain('no-restricted-imports');
  });

  it('rejects the AWS SDK in a use case', async () => {
    const found = await violations(
      'shared/app/x.ts',
      "import { SQSClient } from '@aws-sdk/client-sqs';\nexport const client = new SQSClient({});\n",
    );
    expect(found).toContain('no-restricted-imports');
  });

  it("rejects the SDK's transport packages outside the adapters", async () => {
    const found = await violations(
      'shared/app/x.ts',
      "import { NodeHttpHandler } from '@smithy/node-http-handler';\nexport const handler = new NodeHttpHandler();\n",
    );
    expect(found).toContain('no-restricted-imports');
    expect(
      await violations(
        'shared/adapters/x.ts',
        "import { NodeHttpHandler } from '@smithy/node-http-handler';\nexport const handler = new NodeHttpHandler();\n",
      ),
    ).not.toContain('no-restricted-imports');
  });

  it('rejects an adapter import in a use case', async () => {
    const found = await violations(
      'shared/app/x.ts',
      "import { documentClient } from '../adapters/dynamodb/client.js';\nexport const client = documentClient;\n",
    );
    expect(found).toContain('no-restricted-imports');
  });

  it('rejects an adapter import in a port declaration', async () => {
    const found = await violations(
      'shared/app/ports/x.ts',
      "import type { RunStore } from '../../adapters/dynamodb/run-store.js';\nexport type X = RunStore;\n",
    );
    expect(found).toContain('no-restricted-imports');
  });

  it('rejects a use case, an adapter or file-system access in the domain', async () => {
    for (const source of ['../app/runs.js', '../adapters/sfn.js', 'node:fs', 'node:child_process']) {
      const found = await violations('shared/domain/x.ts', `import * as m from '${source}';\nexport const x = m;\n`);
      expect(found, source).toContain('no-restricted-imports');
    }
  });

  it('rejects process.env outside the config module', async () => {
    const found = await violations('functions/x.ts', 'export const region = process.env.AWS_REGION;\n');
    expect(found).toContain('no-restricted-properties');
  });

  it('rejects a handler importing another handler', async () => {
    for (const [filePath, source] of [
      ['functions/api/cancel-run.ts', './get-run.js'],
      ['functions/ws/connect.ts', '../api/get-run.js'],
      ['functions/workflow/plan.ts', '../reconciler.js'],
    ] as const) {
      const found = await violations(filePath, `import { handler } from '${source}';\nexport const other = handler;\n`);
      expect(found, `${filePath} -> ${source}`).toContain('no-restricted-imports');
    }
  });

  it('accepts the imports each layer is allowed', async () => {
    const allowed: Array<[string, string]> = [
      ['shared/adapters/x.ts', "import { SQSClient } from '@aws-sdk/client-sqs';\nexport const c = SQSClient;\n"],
      ['local/x.ts', "import { SQSClient } from '@aws-sdk/client-sqs';\nexport const c = SQSClient;\n"],
      ['shared/domain/x.ts', "import { createHash } from 'node:crypto';\nexport const h = createHash;\n"],
      ['shared/app/x.ts', "import { runSchema } from '../domain/entities.js';\nexport const s = runSchema;\n"],
      ['shared/config.ts', 'export const env = process.env;\n'],
      [
        'functions/api/cancel-run.ts',
        [
          "import { makeCancelRun } from '../../shared/app/runs.js';",
          "import { runDeps } from '../dependencies.js';",
          "import { httpHandler } from '../http.js';",
          "import { runPathSchema } from '../../shared/resources/api-schemas.js';",
          'export const all = [makeCancelRun, runDeps, httpHandler, runPathSchema];',
          '',
        ].join('\n'),
      ],
    ];
    for (const [filePath, code] of allowed) expect(await violations(filePath, code), filePath).toEqual([]);
  });
});
