import type { AdmissionWrite } from '../../app/ports/admission.js';
import type { TransactWriteCommandInput } from '@aws-sdk/lib-dynamodb';

type TransactItem = NonNullable<TransactWriteCommandInput['TransactItems']>[number];

/** The partition holding a tenant's admission cells. */
export const admissionKey = (tenantId: string) => `ADMISSION#${tenantId}`;
/** The partition noting tenants with backlog, for the admitter. */
export const BACKLOG_TENANTS = 'ADMISSION_BACKLOGS';

const ttl = (iso: string | undefined) =>
  iso === undefined ? {} : { expiresAt: Math.floor(Date.parse(iso) / 1000) + 3_600 };

/**
 * The transaction item of one admission write. A counter is taken with a condition on its own
 * value, so two admissions racing for the last slot cannot both commit.
 */
export function admissionItemOf(table: string, intent: AdmissionWrite): TransactItem {
  const Key = { pk: admissionKey(intent.tenantId), sk: intent.name };
  switch (intent.kind) {
    case 'takeCounter':
      return {
        Update: {
          TableName: table,
          Key,
          UpdateExpression: 'ADD n :one' + (intent.expiresAt ? ' SET expiresAt = :exp' : ''),
          ConditionExpression: 'attribute_not_exists(n) OR n < :max',
          ExpressionAttributeValues: {
            ':one': 1,
            ':max': intent.max,
            ...(intent.expiresAt && { ':exp': ttl(intent.expiresAt).expiresAt }),
          },
        },
      };
    case 'addCounter':
      return {
        Update: {
          TableName: table,
          Key,
          UpdateExpression: 'ADD n :amount',
          ExpressionAttributeValues: { ':amount': intent.amount },
        },
      };
    case 'putCell': {
      const { expect } = intent;
      const condition =
        expect === undefined
          ? {}
          : expect === 'absent'
            ? { ConditionExpression: 'attribute_not_exists(pk)' }
            : expect.equals === undefined
              ? {
                  ConditionExpression: 'attribute_not_exists(v.#f)',
                  ExpressionAttributeNames: { '#f': expect.field },
                }
              : {
                  ConditionExpression: 'v.#f = :was',
                  ExpressionAttributeNames: { '#f': expect.field },
                  ExpressionAttributeValues: { ':was': expect.equals },
                };
      return { Put: { TableName: table, Item: { ...Key, v: intent.value, ...ttl(intent.expiresAt) }, ...condition } };
    }
    case 'deleteCell':
      return {
        Delete: {
          TableName: table,
          Key,
          ...(intent.mustExist && { ConditionExpression: 'attribute_exists(pk)' }),
        },
      };
  }
}
