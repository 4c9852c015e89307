import { Duration, RemovalPolicy, Stack, type StackProps } from 'aws-cdk-lib';
import type { Table } from 'aws-cdk-lib/aws-dynamodb';
import { ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { Key, KeySpec, KeyUsage } from 'aws-cdk-lib/aws-kms';
import { BlockPublicAccess, Bucket, BucketEncryption, ObjectOwnership } from 'aws-cdk-lib/aws-s3';
import type { Construct } from 'constructs';
import { SANDBOX_PROFILES, type SandboxProfileName } from '../shared/domain/sandbox-profiles.js';
import { TABLES, type TableKey } from '../shared/resources/tables.js';
import type { DeploymentConfig } from './config.js';
import { ProfileQueue } from './constructs/profile-queue.js';
import { CapstanTable } from './constructs/table.js';
import { physicalNames } from './names.js';

export interface StatefulStackProps extends StackProps {
  readonly config: DeploymentConfig;
}

/** What holds data: the KMS key, the tables, the per-profile queues and the evidence bucket. */
export class StatefulStack extends Stack {
  public readonly key: Key;
  /** Signs evidence manifests; the private half never leaves KMS. */
  public readonly evidenceKey: Key;
  public readonly tables: Readonly<Record<TableKey, Table>>;
  public readonly queues: ReadonlyMap<SandboxProfileName, ProfileQueue>;
  public readonly evidenceBucket: Bucket;

  constructor(scope: Construct, id: string, props: StatefulStackProps) {
    super(scope, id, props);
    const { config } = props;

    this.key = new Key(this, 'Key', {
      description: 'Encrypts Capstan tables, queues, buckets and logs',
      enableKeyRotation: true,
      removalPolicy: RemovalPolicy.RETAIN,
    });
    // Encrypted log groups and the alarm topic need their services to use the key.
    this.key.grantEncryptDecrypt(new ServicePrincipal(`logs.${this.region}.amazonaws.com`));
    this.key.grantEncryptDecrypt(new ServicePrincipal('cloudwatch.amazonaws.com'));
    // Asymmetric keys cannot rotate: a new key would not verify the bundles already signed.
    this.evidenceKey = new Key(this, 'EvidenceKey', {
      description: 'Signs Capstan evidence manifests (DSSE, ECDSA P-256 SHA-256)',
      keySpec: KeySpec.ECC_NIST_P256,
      keyUsage: KeyUsage.SIGN_VERIFY,
      alias: `${config.prefix}-evidence`,
      removalPolicy: RemovalPolicy.RETAIN,
    });

    const table = (key: TableKey) =>
      new CapstanTable(this, TABLES[key].id, {
        spec: TABLES[key],
        tableName: physicalNames(config.prefix, this).tables[key],
        encryptionKey: this.key,
      }).table;
    this.tables = { state: table('state'), events: table('events'), connections: table('connections') };

    this.queues = new Map(
      config.profiles.map((name) => [
        name,
        new ProfileQueue(this, `Queue-${name}`, {
          prefix: config.prefix,
          profile: SANDBOX_PROFILES[name],
          encryptionKey: this.key,
        }),
      ]),
    );

    const accessLogs = new Bucket(this, 'AccessLogs', {
      encryption: BucketEncryption.S3_MANAGED,
      blockPublicAccess: BlockPublicAccess.BLOCK_ALL,
      enforceSSL: true,
      objectOwnership: ObjectOwnership.BUCKET_OWNER_PREFERRED,
      lifecycleRules: [{ expiration: Duration.days(365) }],
      removalPolicy: RemovalPolicy.RETAIN,
    });
    this.evidenceBucket = new Bucket(this, 'Evidence', {
      bucketName: physicalNames(config.prefix, this).evidenceBucket,
      encryption: BucketEncryption.KMS,
      encryptionKey: this.key,
      bucketKeyEnabled: true,
      blockPublicAccess: BlockPublicAccess.BLOCK_ALL,
      enforceSSL: true,
      versioned: true,
      serverAccessLogsBucket: accessLogs,
      serverAccessLogsPrefix: 'evidence/',
      removalPolicy: RemovalPolicy.RETAIN,
    });
  }
}
