import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { capacityOf, configSchema } from '../shared/config.js';
import { type LocalStack, type LocalStackOptions, startLocalStack } from '../local/stack.js';
import type { RunEvent } from '../shared/domain/events.js';
import { freePortBlock } from '../test/support/local-dynamodb.js';
import { DYNAMODB_STORAGE } from './storage.js';

/** One line of the report: what was measured, the figure, and what it is compared with. */
export interface Measure {
  readonly name: string;
  readonly value: string;
  readonly note?: string;
}

export interface Section {
  /** The scenario that made it (`runs`), set by the runner: a scenario run again replaces its section. */
  readonly scenario?: string;
  readonly title: string;
  readonly setup: string;
  readonly measures: readonly Measure[];
  /** The raw numbers, kept in the JSON report. */
  readonly data: Record<string, unknown>;
  /** Promises the figures broke (the scenario ran, but `npm run bench` exits 1). */
  readonly failures?: readonly string[];
}

export type Scenario = (progress: (line: string) => void) => Promise<Section>;

/** Clock ticks per second in `/proc/<pid>/stat` (`USER_HZ`, 100 on Linux). */
const USER_HZ = 100;

/**
 * CPU a process has used (user + system), in milliseconds, from `/proc/<pid>/stat`; undefined where
 * there is no `/proc` or the process is gone.
 */
export function processCpuMs(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The fields after the command name, which is in parentheses and may hold spaces.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / USER_HZ;
  } catch {
    return undefined;
  }
}

/** CPU of a `process.cpuUsage()`-style reading, in milliseconds. */
export const cpuMs = (usage: NodeJS.CpuUsage): number => (usage.user + usage.system) / 1000;

/** The `p`th percentile (0–100) by nearest rank. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1] ?? Number.NaN;
}

export const ms = (value: number) => `${Math.round(value)} ms`;
export const fixed = (value: number, digits = 2) => value.toFixed(digits);

/** Runs `task` over `items` with at most `limit` in flight. */
export async function pool<T, R>(items: readonly T[], limit: number, task: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array<R>(items.length);
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await task(items[index] as T);
    }
  });
  await Promise.all(lanes);
  return results;
}

export const sleep = (millis: number) => new Promise((resolve) => setTimeout(resolve, millis));

export interface BenchStack {
  readonly stack: LocalStack;
  readonly token: string;
  readonly logs: string[];
  api(method: string, path: string, body?: unknown, headers?: Record<string, string>, as?: string): Promise<ApiReply>;
  events(runId: string): Promise<RunEvent[]>;
  close(): Promise<void>;
}

export interface ApiReply {
  readonly status: number;
  readonly body: Record<string, unknown>;
}

/**
 * Handlers keep their clients and configuration for the life of the process (as a warm Lambda
 * does), so every stack the bench starts uses the same ports, issuer key and metered layout.
 */
let place: { port: number; home: string } | undefined;

/** A fresh local stack (empty data), with the reconciler out of the way unless asked. */
export async function startBenchStack(options: Partial<LocalStackOptions> = {}): Promise<BenchStack> {
  place ??= { port: await freePortBlock(8), home: mkdtempSync(join(tmpdir(), 'capstan-bench-')) };
  const { home } = place;
  const logs: string[] = [];
  const stack = await startLocalStack({
    port: place.port,
    stateDir: home,
    fresh: true,
    workers: {},
    reconcileIntervalMs: 3_600_000,
    meterRequests: true,
    dynamoDbInMemory: DYNAMODB_STORAGE === 'memory',
    log: (line) => logs.push(line),
    ...options,
  });
  const token = stack.issuer.tokens.operator ?? '';
  const api = async (
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
    as = token,
  ): Promise<ApiReply> => {
    const response = await fetch(`${stack.restUrl}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${as}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    return { status: response.status, body: (text ? JSON.parse(text) : {}) as Record<string, unknown> };
  };
  return {
    stack,
    token,
    logs,
    api,
    events: async (runId) => {
      const events: RunEvent[] = [];
      for (;;) {
        const { body } = await api('GET', `/runs/${runId}/events?since=${events.length}&limit=1000`);
        const page = body.events as RunEvent[];
        events.push(...page);
        if (page.length < 1000) return events;
      }
    },
    close: async () => {
      await stack.stop();
    },
  };
}

/** Registers a runbook and fails loudly if the API refuses it. */
export async function register(bench: BenchStack, runbook: Record<string, unknown>): Promise<void> {
  const reply = await bench.api('POST', '/runbooks', runbook);
  if (reply.status >= 300) throw new Error(`registering ${String(runbook.name)}: ${JSON.stringify(reply.body)}`);
}

/** Creates a run and returns its id. */
export async function createRun(bench: BenchStack, runbookId: string, inputs?: Record<string, unknown>) {
  const reply = await bench.api(
    'POST',
    '/runs',
    { runbookId, ...(inputs ? { inputs } : {}) },
    { 'idempotency-key': crypto.randomUUID() },
  );
  if (reply.status !== 202) throw new Error(`creating a run: ${reply.status} ${JSON.stringify(reply.body)}`);
  return String(reply.body.runId);
}

/** Waits until no Step Functions execution is running (every run has settled). */
export async function settle(bench: BenchStack, timeoutMs: number, progress: (line: string) => void): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = -1;
  for (;;) {
    const running = bench.stack.stepFunctions.running;
    if (running === 0) return;
    if (Date.now() > deadline) throw new Error(`${running} executions still running after ${timeoutMs / 1000} s`);
    if (running !== last) progress(`${running} runs in flight`);
    last = running;
    await sleep(250);
  }
}

/** Removes what the bench stacks left on disk. */
export function cleanUp(): void {
  if (place) rmSync(place.home, { recursive: true, force: true });
}

export const timeOf = (event: RunEvent) => Date.parse(event.timestamp);

/** How many steps a worker runs at once, in words: "one step", "4 steps". */
export const stepsAtOnce = (slots: number) => (slots === 1 ? 'one step' : `${slots} steps`);

/** Steps a dev-flex worker runs at once in this bench: as `CAPSTAN_CAPACITY` says, else one. */
export function devFlexSlots(): number {
  const capacity = configSchema.shape.CAPSTAN_CAPACITY.parse(process.env.CAPSTAN_CAPACITY);
  return capacityOf(capacity, 'dev-flex').stepsPerWorker;
}
