import type { Json } from '../../../domain/canonical.js';
import type { RunbookVersion, Worker } from '../../../domain/entities.js';
import type { StepCommand } from '../../../domain/messages.js';
import type { SandboxProfileName } from '../../../domain/sandbox-profiles.js';
import type { CommandQueue, RejectedCommand, TaskCallbacks } from '../interpreter.js';
import type { Clock, RunbookHead, RunbookStore, WorkerStore } from '../../ports.js';

/** A clock that moves only when told to. */
export interface FakeClock extends Clock {
  advance(ms: number): void;
}

export function makeFakeClock(start = new Date('2026-01-01T00:00:00.000Z')): FakeClock {
  let at = start.getTime();
  return {
    now: () => new Date(at),
    advance: (ms) => {
      at += ms;
    },
  };
}

/** A step queue that keeps what it was sent; `refuse` names executions it refuses for good. */
export interface RecordingQueue extends CommandQueue {
  readonly sent: Array<{ profile: SandboxProfileName; command: StepCommand }>;
  readonly refuse: Set<string>;
}

export function makeRecordingQueue(): RecordingQueue {
  const sent: RecordingQueue['sent'] = [];
  const refuse = new Set<string>();
  return {
    sent,
    refuse,
    async send(profile, commands): Promise<readonly RejectedCommand[]> {
      const rejected = commands.filter((c) => refuse.has(c.executionId));
      sent.push(...commands.filter((c) => !refuse.has(c.executionId)).map((command) => ({ profile, command })));
      return rejected.map((c) => ({ executionId: c.executionId, code: 'TOO_LARGE', message: 'refused' }));
    },
  };
}

/** Task callbacks that keep which tokens were resumed, and with what. */
export interface RecordingCallbacks extends TaskCallbacks {
  readonly succeeded: Array<{ taskToken: string; output: Record<string, Json> }>;
  readonly failed: Array<{ taskToken: string; error: string; cause: string }>;
  /** Tokens whose task is gone (timed out, or replaced by a new one): resuming them is refused. */
  readonly gone: Set<string>;
}

export function makeRecordingCallbacks(): RecordingCallbacks {
  const succeeded: RecordingCallbacks['succeeded'] = [];
  const failed: RecordingCallbacks['failed'] = [];
  const gone = new Set<string>();
  return {
    succeeded,
    failed,
    gone,
    async succeed(taskToken, output) {
      if (gone.has(taskToken)) return false;
      succeeded.push({ taskToken, output });
      return true;
    },
    async fail(taskToken, error, cause) {
      failed.push({ taskToken, error, cause });
    },
  };
}

/** Runbook versions in memory, with the DynamoDB store's first-writer-wins rule. */
export function makeInMemoryRunbooks(): RunbookStore {
  const versions = new Map<string, RunbookVersion>();
  const heads = new Map<string, RunbookHead>();
  const key = (tenantId: string, runbookId: string) => `${tenantId}/${runbookId}`;
  return {
    async findByDigest(tenantId, runbookId, digest) {
      return [...versions.values()].find(
        (v) => v.tenantId === tenantId && v.runbookId === runbookId && v.digest === digest,
      );
    },
    async head(tenantId, runbookId) {
      return heads.get(key(tenantId, runbookId));
    },
    async putVersion(version, description) {
      const id = `${key(version.tenantId, version.runbookId)}/${version.version}`;
      if (versions.has(id)) return false;
      versions.set(id, version);
      heads.set(key(version.tenantId, version.runbookId), {
        runbookId: version.runbookId,
        latestVersion: version.version,
        digest: version.digest,
        ...(description !== undefined && { description }),
        updatedAt: version.createdAt,
      });
      return true;
    },
    async get(tenantId, runbookId, version) {
      return versions.get(`${key(tenantId, runbookId)}/${version}`);
    },
    async list(tenantId, limit) {
      return { items: [...heads.values()].filter((h) => heads.get(key(tenantId, h.runbookId)) === h).slice(0, limit) };
    },
  };
}

/** Registered workers in memory, with the DynamoDB store's conditional status changes. */
export function makeInMemoryWorkers(): WorkerStore {
  const workers = new Map<string, Worker & { drainRequested: boolean }>();
  const live = (w: Worker | undefined) => w !== undefined && w.status !== 'dead' && w.status !== 'deregistered';
  return {
    async register(worker) {
      workers.set(worker.workerId, { ...worker, drainRequested: false });
    },
    async heartbeat(workerId, beat) {
      const worker = workers.get(workerId);
      if (!worker || !live(worker)) return { accepted: false, drainRequested: false };
      const { currentExecutionId: _previous, ...rest } = worker;
      workers.set(workerId, {
        ...rest,
        status: beat.status,
        lastHeartbeatAt: beat.at,
        stats: beat.stats,
        ...(beat.currentExecutionId !== undefined && { currentExecutionId: beat.currentExecutionId }),
      });
      return { accepted: true, drainRequested: worker.drainRequested };
    },
    async setStatus(workerId, status, expected) {
      const worker = workers.get(workerId);
      if (!worker || !live(worker)) return false;
      if (expected && worker.lastHeartbeatAt !== expected.lastHeartbeatAt) return false;
      workers.set(workerId, { ...worker, status });
      return true;
    },
    async clearCurrent(workerId, executionId) {
      const worker = workers.get(workerId);
      if (!worker || worker.status !== 'busy' || worker.currentExecutionId !== executionId) return false;
      const { currentExecutionId: _cleared, ...rest } = worker;
      workers.set(workerId, { ...rest, status: 'idle' });
      return true;
    },
    async requestDrain(workerId) {
      const worker = workers.get(workerId);
      if (!worker || !live(worker)) return false;
      workers.set(workerId, { ...worker, drainRequested: true });
      return true;
    },
    async list() {
      return [...workers.values()].map((w) => ({ ...w }));
    },
  };
}
