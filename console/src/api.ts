import type { z } from 'zod';
import type {
  approvalViewSchema,
  RunDetail,
  runSummarySchema,
  workerViewSchema,
} from '../../shared/resources/api-schemas.js';
import type { RunEvent } from '../../shared/domain/events.js';
import type { InventoryNode } from '../../shared/domain/inventory.js';

export type { RunDetail, RunEvent };
export type RunSummary = z.infer<typeof runSummarySchema>;
export type ApprovalView = z.infer<typeof approvalViewSchema>;
export type WorkerView = z.infer<typeof workerViewSchema>;
export type StepView = RunDetail['steps'][number];
export type RunStatus = RunSummary['status'];
export type TargetView = StepView['targets'][number];
/** A node as `GET /v1/inventory` answers it (the tenant is the caller's). */
export type NodeView = Omit<InventoryNode, 'tenantId'>;

/** An answer of the API that is not a 2xx, with the API's own code and words. */
export class ApiError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}

/** The public REST API, as the bearer of one token. */
export class Api {
  constructor(
    private readonly base: string,
    private readonly token: string,
  ) {}

  async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    let response: Response;
    try {
      response = await fetch(`${this.base}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${this.token}`,
          accept: 'application/json',
          ...(body !== undefined && { 'content-type': 'application/json' }),
        },
        ...(body !== undefined && { body: JSON.stringify(body) }),
      });
    } catch {
      throw new ApiError('NETWORK', `cannot reach the API at ${this.base}`, 0);
    }
    const text = await response.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    if (!response.ok) {
      const error = (parsed as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
      throw new ApiError(
        typeof error?.code === 'string' ? error.code : 'HTTP_ERROR',
        typeof error?.message === 'string' ? error.message : `${method} ${path} answered ${response.status}`,
        response.status,
      );
    }
    return parsed as T;
  }

  /** The newest runs; a ticket's runs only when `ticket` is given (the server looks them up by ticket id). */
  listRuns(status?: RunStatus, ticket?: string): Promise<{ runs: RunSummary[] }> {
    const query = new URLSearchParams({ limit: '100', ...(status && { status }), ...(ticket && { ticket }) });
    return this.request('GET', `/runs?${query}`);
  }
  run(runId: string): Promise<RunDetail> {
    return this.request('GET', `/runs/${encodeURIComponent(runId)}`);
  }
  events(runId: string, since: number): Promise<{ events: RunEvent[] }> {
    return this.request('GET', `/runs/${encodeURIComponent(runId)}/events?since=${since}&limit=100`);
  }
  decide(runId: string, approvalId: string, decision: 'approve' | 'reject', notes: string): Promise<unknown> {
    return this.request('POST', `/runs/${encodeURIComponent(runId)}/approvals/${encodeURIComponent(approvalId)}`, {
      decision,
      ...(notes.trim() && { notes: notes.trim() }),
    });
  }
  cancel(runId: string): Promise<unknown> {
    return this.request('POST', `/runs/${encodeURIComponent(runId)}/cancel`);
  }
  rollback(runId: string): Promise<unknown> {
    return this.request('POST', `/runs/${encodeURIComponent(runId)}/rollback`);
  }
  resume(runId: string, directive: 'retry' | 'rollback' | 'cancel'): Promise<unknown> {
    return this.request('POST', `/runs/${encodeURIComponent(runId)}/resume`, { directive });
  }
  workers(): Promise<{ workers: WorkerView[] }> {
    return this.request('GET', '/workers');
  }
  drain(workerId: string): Promise<unknown> {
    return this.request('POST', `/workers/${encodeURIComponent(workerId)}/drain`);
  }
  inventory(group?: string): Promise<{ nodes: NodeView[] }> {
    return this.request('GET', `/inventory${group ? `?${new URLSearchParams({ group })}` : ''}`);
  }
  declareNode(nodeId: string, groups: string[], attributes: Record<string, string>): Promise<unknown> {
    return this.request('PUT', `/inventory/nodes/${encodeURIComponent(nodeId)}`, { groups, attributes });
  }
  removeNode(nodeId: string): Promise<unknown> {
    return this.request('DELETE', `/inventory/nodes/${encodeURIComponent(nodeId)}`);
  }
}

/** An error as the console shows it: the API's words, with its code. */
export const describeError = (error: unknown): string =>
  error instanceof ApiError
    ? `${error.message} (${error.code})`
    : error instanceof Error
      ? error.message
      : String(error);
