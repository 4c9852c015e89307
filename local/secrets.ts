import { copyFileSync, existsSync, readFileSync, statSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { AwsServiceError, type JsonService, requireString, startJsonService } from './aws-json.js';

const secretsFileSchema = z.record(z.string().min(1), z.union([z.string(), z.record(z.string(), z.unknown())]));

export interface LocalSecretsOptions {
  readonly port: number;
  /** The JSON file of secret id to value (a string, or an object stored as its JSON text). */
  readonly file: string;
  /** Copied to `file` when it does not exist yet. */
  readonly exampleFile: string;
  readonly region: string;
}

/**
 * A local Secrets Manager endpoint answering GetSecretValue from a JSON file, read on every
 * request so an edit applies at once. The file is created from the example on first start.
 */
export async function startLocalSecrets(options: LocalSecretsOptions): Promise<JsonService> {
  if (!existsSync(options.file)) copyFileSync(options.exampleFile, options.file);
  const read = () => {
    const parsed = secretsFileSchema.safeParse(JSON.parse(readFileSync(options.file, 'utf8')));
    if (!parsed.success)
      throw new AwsServiceError('InternalServiceError', `${options.file} must map secret ids to strings or objects`);
    return parsed.data;
  };
  read(); // a malformed file stops the start with its name, not the first step that needs a secret
  return startJsonService({
    port: options.port,
    targetPrefix: 'secretsmanager',
    operations: {
      GetSecretValue: (input) => {
        const id = requireString(input, 'SecretId');
        const name = id.startsWith('arn:') ? (id.split(':secret:')[1] ?? id) : id;
        const value = read()[name];
        if (value === undefined)
          throw new AwsServiceError('ResourceNotFoundException', "Secrets Manager can't find the specified secret.");
        const secretString = typeof value === 'string' ? value : JSON.stringify(value);
        return {
          ARN: `arn:aws:secretsmanager:${options.region}:000000000000:secret:${name}`,
          Name: name,
          SecretString: secretString,
          VersionId: createHash('sha256').update(secretString).digest('hex').slice(0, 32),
          VersionStages: ['AWSCURRENT'],
          CreatedDate: statSync(options.file).mtimeMs / 1000,
        };
      },
    },
  });
}
