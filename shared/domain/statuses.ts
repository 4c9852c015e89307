import { z } from 'zod';
import { defineStateMachine } from './state-machine.js';

/** Run statuses (brief: "Run statuses"; seeds 001 section 2.1 and 004 section 3). */
export const RUN_STATUSES = [
  'queued',
  'throttled',
  'running',
  'waiting_for_approval',
  'paused',
  'rolling_back',
  'succeeded',
  'failed',
  'cancelled',
] as const;
export const runStatusSchema = z.enum(RUN_STATUSES);
export type RunStatus = z.infer<typeof runStatusSchema>;

export const runStateMachine = defineStateMachine<RunStatus>('run', {
  queued: ['running', 'throttled', 'cancelled', 'failed'],
  throttled: ['queued', 'cancelled'],
  running: ['waiting_for_approval', 'paused', 'rolling_back', 'succeeded', 'failed', 'cancelled'],
  waiting_for_approval: ['running', 'paused', 'rolling_back', 'failed', 'cancelled'],
  // A paused run waits for an operator: retry, roll back or cancel (seed 000 section 4.4).
  paused: ['running', 'rolling_back', 'cancelled', 'failed'],
  // After the rollbacks, the steps meant to run after a failure (`always`, `on_failure`) still run.
  rolling_back: ['running', 'waiting_for_approval', 'failed', 'cancelled', 'paused'],
  succeeded: [],
  failed: [],
  cancelled: [],
});

/** One step on one target: leased by a worker, executed, reported (seed 001 section 2.2, seed 002). */
export const STEP_EXECUTION_STATUSES = [
  'pending',
  'leased',
  'running',
  'succeeded',
  'failed',
  'timed_out',
  'cancelled',
  'expired',
] as const;
export const stepExecutionStatusSchema = z.enum(STEP_EXECUTION_STATUSES);
export type StepExecutionStatus = z.infer<typeof stepExecutionStatusSchema>;

export const stepExecutionStateMachine = defineStateMachine<StepExecutionStatus>('step execution', {
  // A command no queue can carry fails its execution before any worker sees it.
  pending: ['leased', 'failed', 'cancelled'],
  leased: ['running', 'succeeded', 'failed', 'expired', 'cancelled'],
  running: ['succeeded', 'failed', 'timed_out', 'expired', 'cancelled'],
  succeeded: [],
  failed: [],
  timed_out: [],
  cancelled: [],
  // An expired lease ends this attempt; recovery dispatches a new attempt as a new execution.
  expired: [],
});

/** Worker lifecycle (seed 002): derived liveness (offline, dead) comes from missed heartbeats. */
export const WORKER_STATUSES = ['idle', 'busy', 'draining', 'offline', 'dead', 'deregistered'] as const;
export const workerStatusSchema = z.enum(WORKER_STATUSES);
export type WorkerStatus = z.infer<typeof workerStatusSchema>;

export const workerStateMachine = defineStateMachine<WorkerStatus>('worker', {
  idle: ['busy', 'draining', 'offline', 'dead', 'deregistered'],
  busy: ['idle', 'draining', 'offline', 'dead', 'deregistered'],
  draining: ['deregistered', 'offline', 'dead'],
  offline: ['idle', 'busy', 'draining', 'dead', 'deregistered'],
  dead: [],
  deregistered: [],
});

/** Approval gate lifecycle (seed 000 section 4, seed 001 section 1.3). `escalated` keeps waiting. */
export const APPROVAL_STATUSES = ['requested', 'escalated', 'approved', 'rejected', 'expired', 'cancelled'] as const;
export const approvalStatusSchema = z.enum(APPROVAL_STATUSES);
export type ApprovalStatus = z.infer<typeof approvalStatusSchema>;

export const approvalStateMachine = defineStateMachine<ApprovalStatus>('approval', {
  requested: ['escalated', 'approved', 'rejected', 'expired', 'cancelled'],
  escalated: ['approved', 'rejected', 'expired', 'cancelled'],
  approved: [],
  rejected: [],
  expired: [],
  cancelled: [],
});
