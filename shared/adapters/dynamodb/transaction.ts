import { TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import type { TransactWriteCommandInput } from '@aws-sdk/lib-dynamodb';
import type { WriteIntent } from '../../app/ports/writes.js';
import type { Approval } from '../../domain/entities.js';
import { StaleWriteError } from '../../domain/errors.js';
import { stepExecutionStateMachine } from '../../domain/statuses.js';
import { admissionItemOf } from './admission-items.js';
import { ticketActiveItem } from './ticket-items.js';
import { aggregateSk, approvalSk, executionSk, indexes, META, receiptKey, runKey } from './keys.js';

export type TransactItem = NonNullable<TransactWriteCommandInput['TransactItems']>[number];

/** When time next acts on an open gate; none once it is resolved. */
const dueAt = (approval: Approval) =>
  approval.status === 'requested'
    ? approval.slaDeadline
    : approval.status === 'escalated'
      ? approval.hardDeadline
      : undefined;

export const approvalDueKey = (approval: Approval) => {
  const at = dueAt(approval);
  return at === undefined
    ? undefined
    : { gsi2pk: indexes.approvalsDue, gsi2sk: `${at}#${approval.runId}#${approval.approvalId}` };
};

/** The transaction item that carries out one write intent in the state table. */
export function transactItemOf(table: string, intent: WriteIntent): TransactItem {
  switch (intent.kind) {
    case 'takeCounter':
    case 'addCounter':
    case 'putCell':
    case 'deleteCell':
      return admissionItemOf(table, intent);
    case 'claimTicket':
      return ticketActiveItem(table, intent);
    case 'putExecution': {
      const { execution } = intent;
      return {
        Put: {
          TableName: table,
          Item: {
            pk: runKey(execution.runId),
            sk: executionSk(execution.executionId),
            se: execution,
            status: execution.status,
          },
          ConditionExpression: 'attribute_not_exists(pk)',
        },
      };
    }
    case 'updateExecution': {
      const { execution, from, owner } = intent;
      const values: Record<string, unknown> = { ':e': execution, ':s': execution.status };
      from.forEach((status, i) => (values[`:f${i}`] = status));
      if (owner) values[':owner'] = owner;
      return {
        Update: {
          TableName: table,
          Key: { pk: runKey(execution.runId), sk: executionSk(execution.executionId) },
          UpdateExpression:
            'SET se = :e, #status = :s' +
            (stepExecutionStateMachine.isTerminal(execution.status) ? ' REMOVE gsi2pk, gsi2sk, leaseUntil' : ''),
          ConditionExpression:
            `#status IN (${from.map((_, i) => `:f${i}`).join(', ')})` + (owner ? ' AND se.leaseOwner = :owner' : ''),
          ExpressionAttributeNames: { '#status': 'status' },
          ExpressionAttributeValues: values,
        },
      };
    }
    case 'expireExecution': {
      const { execution, now } = intent;
      return {
        Update: {
          TableName: table,
          Key: { pk: runKey(execution.runId), sk: executionSk(execution.executionId) },
          UpdateExpression: 'SET se = :e, #status = :s REMOVE gsi2pk, gsi2sk, leaseUntil',
          ConditionExpression: '#status IN (:leased, :running) AND leaseUntil < :now',
          ExpressionAttributeNames: { '#status': 'status' },
          ExpressionAttributeValues: {
            ':e': execution,
            ':s': execution.status,
            ':leased': 'leased',
            ':running': 'running',
            ':now': now.toISOString(),
          },
        },
      };
    }
    case 'putAggregate': {
      const { runId, aggregate } = intent;
      return {
        Put: {
          TableName: table,
          Item: {
            pk: runKey(runId),
            sk: aggregateSk(aggregate.kind, aggregate.stepId, aggregate.attempt),
            ...aggregate,
          },
          ConditionExpression: 'attribute_not_exists(pk)',
        },
      };
    }
    case 'countResult': {
      const { ref, succeeded, completes } = intent;
      return {
        Update: {
          TableName: table,
          Key: { pk: runKey(ref.runId), sk: aggregateSk(ref.stepKind, ref.stepId, ref.attempt) },
          UpdateExpression: 'ADD #done :one, #outcome :one' + (completes ? ' SET #completed = :true' : ''),
          ConditionExpression:
            'attribute_exists(pk) AND #done < #total' + (completes ? ' AND #total = :one AND #completed = :false' : ''),
          ExpressionAttributeNames: {
            '#done': 'done',
            '#total': 'total',
            '#outcome': succeeded ? 'succeeded' : 'failed',
            ...(completes && { '#completed': 'completed' }),
          },
          ExpressionAttributeValues: { ':one': 1, ...(completes && { ':true': true, ':false': false }) },
        },
      };
    }
    case 'countUnsent': {
      const { ref, count, total } = intent;
      return {
        Update: {
          TableName: table,
          Key: { pk: runKey(ref.runId), sk: aggregateSk(ref.stepKind, ref.stepId, ref.attempt) },
          UpdateExpression: 'ADD #done :n, #failed :n',
          ConditionExpression: 'attribute_exists(pk) AND #done <= :max',
          ExpressionAttributeNames: { '#done': 'done', '#failed': 'failed' },
          ExpressionAttributeValues: { ':n': count, ':max': total - count },
        },
      };
    }
    case 'releaseTargets': {
      const { ref, from, to } = intent;
      return {
        Update: {
          TableName: table,
          Key: { pk: runKey(ref.runId), sk: aggregateSk(ref.stepKind, ref.stepId, ref.attempt) },
          UpdateExpression: 'SET #released = :to',
          ConditionExpression: 'attribute_exists(pk) AND #released = :from',
          ExpressionAttributeNames: { '#released': 'released' },
          ExpressionAttributeValues: { ':from': from, ':to': to },
        },
      };
    }
    case 'skipTargets': {
      const { ref, from, count } = intent;
      return {
        Update: {
          TableName: table,
          Key: { pk: runKey(ref.runId), sk: aggregateSk(ref.stepKind, ref.stepId, ref.attempt) },
          UpdateExpression: 'SET #released = :to ADD #done :n, #skipped :n',
          ConditionExpression: 'attribute_exists(pk) AND #released = :from',
          ExpressionAttributeNames: { '#released': 'released', '#done': 'done', '#skipped': 'skipped' },
          ExpressionAttributeValues: { ':from': from, ':to': from + count, ':n': count },
        },
      };
    }
    case 'putReceipt':
      return {
        Put: {
          TableName: table,
          Item: { pk: receiptKey(intent.receipt.key), sk: META, receipt: intent.receipt },
          ConditionExpression: 'attribute_not_exists(pk)',
        },
      };
    case 'putApproval': {
      const { approval } = intent;
      return {
        Put: {
          TableName: table,
          Item: {
            pk: runKey(approval.runId),
            sk: approvalSk(approval.approvalId),
            approval,
            status: approval.status,
            decisionCount: approval.decisions.length,
            ...approvalDueKey(approval),
          },
          ConditionExpression: 'attribute_not_exists(pk)',
        },
      };
    }
    case 'updateApproval': {
      const { approval, was } = intent;
      const due = approvalDueKey(approval);
      return {
        Update: {
          TableName: table,
          Key: { pk: runKey(approval.runId), sk: approvalSk(approval.approvalId) },
          UpdateExpression:
            'SET approval = :a, #status = :s, decisionCount = :n' +
            (due ? ', gsi2pk = :dpk, gsi2sk = :dsk' : ' REMOVE gsi2pk, gsi2sk'),
          ConditionExpression: '#status = :was AND decisionCount = :wasCount',
          ExpressionAttributeNames: { '#status': 'status' },
          ExpressionAttributeValues: {
            ':a': approval,
            ':s': approval.status,
            ':n': approval.decisions.length,
            ':was': was.status,
            ':wasCount': was.decisions.length,
            ...(due && { ':dpk': due.gsi2pk, ':dsk': due.gsi2sk }),
          },
        },
      };
    }
  }
}

/**
 * For a transaction whose first item is the run's head: true when it lost its race on the head
 * (another writer moved the chain, or held one of the items), so deciding again is right. A write
 * whose own condition failed throws `StaleWriteError`; any other error is thrown as it is.
 */
export function headMovedOrThrow(error: unknown): true {
  const codes = cancellationCodes(error);
  if (!codes) throw error;
  if (codes[0] === 'ConditionalCheckFailed' || codes.includes('TransactionConflict')) return true;
  if (codes.includes('ConditionalCheckFailed')) throw new StaleWriteError(codes);
  throw error;
}

/** The cancellation codes of a refused transaction, one per item; undefined for any other error. */
export function cancellationCodes(error: unknown): string[] | undefined {
  if (!(error instanceof TransactionCanceledException)) return undefined;
  return (error.CancellationReasons ?? []).map((r) => r.Code ?? 'None');
}
