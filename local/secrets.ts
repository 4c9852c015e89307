import { copyFileSync, existsSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { createHash, randomBytes } from 'node:crypto';
import { z } from 'zod';
import { AwsServiceError, type JsonService, optionalString, requireString, startJsonService } from './aws-json.js';

const secretValueSchema = z.union([z.string(), z.record(z.string(), z.unknown())]);
const secretsFileSchema = z.record(z.string().min(1), secretValueSchema);
type SecretValue = z.infer<typeof secretValueSchema>;

const versionSchema = z.strictObject({ versionId: z.string(), secretString: z.string() });
/** Per secret, the version a rotation made current and the one it replaced. */
const versionsFileSchema = z.record(
  z.string(),
  z.strictObject({ current: versionSchema, previous: versionSchema.optional() }),
);
type Versions = z.infer<typeof versionsFileSchema>;

export interface LocalSecretsOptions {
  readonly port: number;
  /** The JSON file of secret id to value (a string, or an object stored as its JSON text). */
  readonly file: string;
  /** Copied to `file` when it does not exist yet. */
  readonly exampleFile: string;
  readonly region: string;
}

const textOf = (value: SecretValue) => (typeof value === 'string' ? value : JSON.stringify(value));
const hashVersion = (secretString: string) => createHash('sha256').update(secretString).digest('hex').slice(0, 32);

/**
 * The value a rotation function would set: a new `password` for an object secret, a new string
 * for a string one. The local stack has no rotation Lambda, so it stands in for one.
 */
function rotated(value: SecretValue): SecretValue {
  const fresh = randomBytes(24).toString('base64url');
  return typeof value === 'string' ? fresh : { ...value, password: fresh };
}

function writeJson(file: string, value: unknown): void {
  writeFileSync(`${file}.tmp`, `${JSON.stringify(value, null, 2)}\n`, { mode: 0o600 });
  renameSync(`${file}.tmp`, file);
}

/**
 * A local Secrets Manager endpoint: GetSecretValue from a JSON file, read on every request so an
 * edit applies at once, and RotateSecret, which writes a new value to that file as a new version
 * (the request token is its id, so the same request twice rotates once), makes it `AWSCURRENT`
 * and keeps the replaced one as `AWSPREVIOUS`. The file is created from the example on first start.
 */
export async function startLocalSecrets(options: LocalSecretsOptions): Promise<JsonService> {
  if (!existsSync(options.file)) copyFileSync(options.exampleFile, options.file);
  const versionsFile = options.file.replace(/(\.json)?$/, '.versions.json');
  const read = () => {
    const parsed = secretsFileSchema.safeParse(JSON.parse(readFileSync(options.file, 'utf8')));
    if (!parsed.success)
      throw new AwsServiceError('InternalServiceError', `${options.file} must map secret ids to strings or objects`);
    return parsed.data;
  };
  const readVersions = (): Versions =>
    existsSync(versionsFile) ? versionsFileSchema.parse(JSON.parse(readFileSync(versionsFile, 'utf8'))) : {};
  const nameOf = (input: Record<string, unknown>) => {
    const id = requireString(input, 'SecretId');
    return id.startsWith('arn:') ? (id.split(':secret:')[1] ?? id) : id;
  };
  const find = (name: string) => {
    const value = read()[name];
    if (value === undefined)
      throw new AwsServiceError('ResourceNotFoundException', "Secrets Manager can't find the specified secret.");
    return value;
  };
  const arnOf = (name: string) => `arn:aws:secretsmanager:${options.region}:000000000000:secret:${name}`;
  /** The current version: the one a rotation recorded, unless the file was edited since. */
  const currentOf = (name: string, secretString: string) => {
    const recorded = readVersions()[name];
    return recorded?.current.secretString === secretString
      ? recorded.current
      : { versionId: hashVersion(secretString), secretString };
  };
  read(); // a malformed file stops the start with its name, not the first step that needs a secret
  return startJsonService({
    port: options.port,
    targetPrefix: 'secretsmanager',
    operations: {
      GetSecretValue: (input) => {
        const name = nameOf(input);
        const current = currentOf(name, textOf(find(name)));
        const previous = readVersions()[name]?.previous;
        const stage = optionalString(input, 'VersionStage');
        const versionId = optionalString(input, 'VersionId');
        const wantsPrevious = stage === 'AWSPREVIOUS' || (versionId !== undefined && versionId === previous?.versionId);
        if ((stage !== undefined && stage !== 'AWSCURRENT' && stage !== 'AWSPREVIOUS') || (wantsPrevious && !previous))
          throw new AwsServiceError(
            'ResourceNotFoundException',
            "Secrets Manager can't find the specified secret value.",
          );
        if (versionId !== undefined && !wantsPrevious && versionId !== current.versionId)
          throw new AwsServiceError(
            'ResourceNotFoundException',
            "Secrets Manager can't find the specified secret value.",
          );
        const version = wantsPrevious && previous ? previous : current;
        return {
          ARN: arnOf(name),
          Name: name,
          SecretString: version.secretString,
          VersionId: version.versionId,
          VersionStages: [wantsPrevious ? 'AWSPREVIOUS' : 'AWSCURRENT'],
          CreatedDate: statSync(options.file).mtimeMs / 1000,
        };
      },
      RotateSecret: (input) => {
        const name = nameOf(input);
        const secrets = read();
        const value = find(name);
        const current = currentOf(name, textOf(value));
        const token = optionalString(input, 'ClientRequestToken');
        if (token !== undefined && (token.length < 32 || token.length > 64))
          throw new AwsServiceError('InvalidParameterException', 'ClientRequestToken must be 32 to 64 characters.');
        // The same request again (the SDK retries with its token) rotates once.
        if (token !== undefined && token === current.versionId)
          return { ARN: arnOf(name), Name: name, VersionId: current.versionId };
        const next = rotated(value);
        const versionId = token ?? randomBytes(16).toString('hex');
        writeJson(options.file, { ...secrets, [name]: next });
        writeJson(versionsFile, {
          ...readVersions(),
          [name]: { current: { versionId, secretString: textOf(next) }, previous: current },
        });
        return { ARN: arnOf(name), Name: name, VersionId: versionId };
      },
    },
  });
}
