import { RemovalPolicy } from 'aws-cdk-lib';
import { AttributeType, BillingMode, StreamViewType, Table, TableEncryption } from 'aws-cdk-lib/aws-dynamodb';
import type { IKey } from 'aws-cdk-lib/aws-kms';
import { Construct } from 'constructs';
import type { KeySpec, TableSpec } from '../../shared/resources/tables.js';

export interface CapstanTableProps {
  readonly spec: TableSpec;
  /** Physical name, so the stateless stack can address the table without a cross-stack export. */
  readonly tableName: string;
  readonly encryptionKey: IKey;
  /** @default RemovalPolicy.RETAIN */
  readonly removalPolicy?: RemovalPolicy;
}

const attribute = (key: KeySpec) => ({
  name: key.name,
  type: key.type === 'S' ? AttributeType.STRING : AttributeType.NUMBER,
});

/** A DynamoDB table built from its shared spec: on-demand, KMS-encrypted, point-in-time recovery on. */
export class CapstanTable extends Construct {
  public readonly table: Table;

  constructor(scope: Construct, id: string, props: CapstanTableProps) {
    super(scope, id);
    const { spec } = props;
    this.table = new Table(this, 'Table', {
      tableName: props.tableName,
      partitionKey: attribute(spec.partitionKey),
      sortKey: spec.sortKey ? attribute(spec.sortKey) : undefined,
      billingMode: BillingMode.PAY_PER_REQUEST,
      encryption: TableEncryption.CUSTOMER_MANAGED,
      encryptionKey: props.encryptionKey,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      stream: spec.stream ? StreamViewType.NEW_IMAGE : undefined,
      timeToLiveAttribute: spec.ttlAttribute,
      deletionProtection: true,
      removalPolicy: props.removalPolicy ?? RemovalPolicy.RETAIN,
    });
    for (const index of spec.globalIndexes) {
      this.table.addGlobalSecondaryIndex({
        indexName: index.name,
        partitionKey: attribute(index.partitionKey),
        sortKey: index.sortKey ? attribute(index.sortKey) : undefined,
      });
    }
  }
}
