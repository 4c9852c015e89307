import { type RunEvent, verifyChain } from '../../shared/domain/events.js';
import {
  type BenchStack,
  createRun,
  fixed,
  ms,
  percentile,
  pool,
  register,
  type Section,
  sleep,
  startBenchStack,
  timeOf,
} from '../support.js';

export interface ChaosOptions {
  /** Runs started; `CAPSTAN_CHAOS_RUNS`, 50 by default. */
  readonly runs: number;
  /** Workers of the one profile the runs use (at least 2). */
  readonly workers: number;
  /** Runs in flight at once (a new one starts when one ends), so queueing does not hide recovery. */
  readonly inFlight: number;
  /** A random worker is SIGKILLed this often while runs are in flight. */
  readonly killEveryMs: number;
  /** At most this many random kills (the suite stops killing after). */
  readonly maxKills: number;
  /** Runs whose worker kills itself right after the counter's effect, before the receipt. */
  readonly targetedCrashes: number;
  /** Every run must have ended (or paused safely and been resolved) by then. */
  readonly deadlineMs: number;
}

/** What the chaos suite found; `doubleEffects`, `brokenChains` and `unfinished` must be 0. */
export interface ChaosFigures {
  readonly runs: number;
  readonly byStatus: Record<string, number>;
  /** Runs paused with LOST_NOT_SAFE_TO_RETRY (a safe outcome), then resolved by an operator directive. */
  readonly pausedSafe: number;
  readonly resolvedBy: Record<string, number>;
  readonly doubleEffects: number;
  readonly lostEffects: number;
  readonly brokenChains: number;
  /** Runs neither terminal nor paused safely at the deadline. */
  readonly unfinished: number;
  readonly randomKills: number;
  readonly targetedCrashes: number;
  /** Kill (or crash) to the lost step's next start, or to the run's pause, per lost step execution. */
  readonly recoveryMs: readonly number[];
  readonly elapsedMs: number;
}

const CRASH_PREFIX = 'chaos-crash-';
const TERMINAL = new Set(['succeeded', 'failed', 'cancelled']);
const LOST_CODES = new Set(['LEASE_EXPIRED', 'LOST_NOT_SAFE_TO_RETRY']);

/** The runbook: a safe step that takes a while, the unsafe counter, and an echo after it. */
const RUNBOOK = {
  name: 'chaos',
  environment: 'dev',
  sandbox_profile: 'dev-flex',
  inputs: { key: { type: 'string' } },
  steps: [
    { id: 'nap', backend: 'test', action: 'sleep', params: { ms: 800 }, retries: 3 },
    { id: 'count', backend: 'test', action: 'counter', params: { key: '{{ inputs.key }}' }, retries: 3 },
    { id: 'tail', backend: 'test', action: 'echo', params: { message: 'counted {{ inputs.key }}' }, retries: 3 },
  ],
};

const errorCode = (event: RunEvent): string | undefined => {
  const error = event.payload.error;
  return error && typeof error === 'object' && !Array.isArray(error) && typeof error.code === 'string'
    ? error.code
    : undefined;
};

/**
 * Runs of counter and sleep steps on a local stack while workers are SIGKILLed every few seconds
 * (the stack's pool starts them again) and some crash between the counter's effect and its
 * receipt. Paused runs are resolved the way a careful operator would: the counter shows the effect
 * happened, so `cancel`; it did not, so `retry`. Every effect must happen at most once.
 */
export async function runChaos(options: ChaosOptions, progress: (line: string) => void): Promise<ChaosFigures> {
  const started = Date.now();
  const bench = await startBenchStack({
    workers: { 'dev-flex': Math.max(2, options.workers) },
    reconcileIntervalMs: 2000,
    meterRequests: false,
    env: { CAPSTAN_WORKER_HEARTBEAT_SECONDS: '1', CAPSTAN_TEST_CRASH_AFTER_COUNTER: CRASH_PREFIX },
  });
  try {
    return await exercise(bench, options, started, progress);
  } finally {
    await bench.close();
  }
}

async function exercise(
  bench: BenchStack,
  options: ChaosOptions,
  started: number,
  progress: (line: string) => void,
): Promise<ChaosFigures> {
  // The stack set the environment the clients read: import them now.
  const { documentClient } = await import('../../shared/adapters/dynamodb/client.js');
  const { makeCounters } = await import('../../shared/adapters/dynamodb/counters.js');
  const { LOCAL_NAMES } = await import('../../local/stack.js');
  const counters = makeCounters(documentClient, LOCAL_NAMES.tables.state);
  await register(bench, RUNBOOK);

  const crashEvery = options.targetedCrashes > 0 ? Math.max(1, Math.floor(options.runs / options.targetedCrashes)) : 0;
  const keys = Array.from({ length: options.runs }, (_, i) =>
    crashEvery > 0 && i % crashEvery === 0 && i / crashEvery < options.targetedCrashes
      ? `${CRASH_PREFIX}${i}`
      : `chaos-${i}`,
  );
  progress(
    `${keys.length} runs, ${options.inFlight} at a time, ${options.targetedCrashes} with a crash after the effect`,
  );

  const kills: Array<{ pid: number; at: number }> = [];
  let done = false;
  const killer = (async () => {
    while (!done && kills.length < options.maxKills) {
      await sleep(options.killEveryMs);
      // Keep one worker alive, as a service keeps its minimum: chaos, not an outage. The kill waits
      // for the supervisor to bring a second one back rather than skipping a whole period.
      let pids = bench.stack.workers.pids;
      while (!done && pids.length < 2) {
        await sleep(250);
        pids = bench.stack.workers.pids;
      }
      if (done) break;
      const pid = pids[Math.floor(Math.random() * pids.length)] ?? 0;
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        continue; // It exited (a targeted crash) between the listing and the kill.
      }
      kills.push({ pid, at: Date.now() });
      progress(`killed worker ${pid} (${kills.length})`);
    }
  })();

  const final = new Map<string, string>();
  const pausedSafe = new Set<string>();
  const resolvedBy: Record<string, number> = {};
  const keyOf = new Map<string, string>();
  const deadline = started + options.deadlineMs;
  /** One run from creation to its end, a safe pause resolved the way a careful operator would. */
  const follow = async (key: string): Promise<string> => {
    const runId = await createRun(bench, 'chaos', { key });
    keyOf.set(runId, key);
    while (Date.now() < deadline) {
      const { body } = await bench.api('GET', `/runs/${runId}`);
      const status = String(body.status);
      if (TERMINAL.has(status)) {
        final.set(runId, status);
        break;
      }
      const error = body.error as { code?: string } | undefined;
      if (status === 'paused' && error?.code === 'LOST_NOT_SAFE_TO_RETRY') {
        pausedSafe.add(runId);
        // The operator checks the effect: it happened, so the run ends; it did not, so it may run.
        const directive = (await counters.read(key)) > 0 ? 'cancel' : 'retry';
        const reply = await bench.api('POST', `/runs/${runId}/resume`, { directive });
        if (reply.status < 300) resolvedBy[directive] = (resolvedBy[directive] ?? 0) + 1;
      }
      await sleep(250);
    }
    return runId;
  };
  const runIds = await pool(keys, options.inFlight, follow);
  done = true;
  await killer;

  const byStatus: Record<string, number> = {};
  let doubleEffects = 0;
  let lostEffects = 0;
  let brokenChains = 0;
  const recoveryMs: number[] = [];
  for (const runId of runIds) {
    const status = final.get(runId) ?? 'unfinished';
    byStatus[status] = (byStatus[status] ?? 0) + 1;
    const count = await counters.read(keyOf.get(runId) ?? '');
    if (count > 1) doubleEffects++;
    if (status === 'succeeded' && count === 0) lostEffects++;
    const events = await bench.events(runId);
    if (!verifyChain(events).valid) brokenChains++;
    recoveryMs.push(...recoveries(events, kills, keyOf.get(runId)?.startsWith(CRASH_PREFIX) ?? false));
  }
  for (const runId of runIds) {
    if (final.has(runId)) continue;
    // What an unfinished run was doing at the deadline: its status and its last events.
    const { body } = await bench.api('GET', `/runs/${runId}`);
    const tail = (await bench.events(runId))
      .slice(-8)
      .map((e) => `${e.type}${e.stepId ? `(${e.stepId})` : ''}${errorCode(e) ? ` ${errorCode(e)}` : ''}`);
    progress(`unfinished ${runId}: ${String(body.status)} ${JSON.stringify(body.error ?? null)}; ${tail.join(' → ')}`);
  }
  const figures: ChaosFigures = {
    runs: runIds.length,
    byStatus,
    pausedSafe: pausedSafe.size,
    resolvedBy,
    doubleEffects,
    lostEffects,
    brokenChains,
    unfinished: runIds.length - final.size,
    randomKills: kills.length,
    targetedCrashes: keys.filter((k) => k.startsWith(CRASH_PREFIX)).length,
    recoveryMs,
    elapsedMs: Date.now() - started,
  };
  progress(JSON.stringify({ ...figures, recoveryMs: undefined }));
  return figures;
}

/**
 * For each step execution of this run lost with its worker: the time from the kill to the lost
 * step's next start (a new attempt), its end from a receipt, or the run's pause. A crash after the
 * effect is timed from the crashed step's own start (it dies within milliseconds of it).
 */
function recoveries(events: readonly RunEvent[], kills: ReadonlyArray<{ pid: number; at: number }>, crashed: boolean) {
  const found: number[] = [];
  events.forEach((event, index) => {
    if (event.type !== 'step.failed' || !LOST_CODES.has(errorCode(event) ?? '')) return;
    const workerId = event.meta.workerId ?? '';
    const lostStart = events
      .slice(0, index)
      .findLast((e) => e.type === 'step.started' && e.stepId === event.stepId && e.meta.workerId === workerId);
    const kill = kills.findLast(
      (k) => workerId.endsWith(`-${k.pid}`) && (lostStart === undefined || k.at >= timeOf(lostStart)),
    );
    const from = kill?.at ?? (crashed && event.stepId === 'count' && lostStart ? timeOf(lostStart) : undefined);
    if (from === undefined) return;
    const next = events
      .slice(index + 1)
      .find((e) => (e.type === 'step.started' && e.stepId === event.stepId) || e.type === 'run.paused');
    const to = errorCode(event) === 'LOST_NOT_SAFE_TO_RETRY' ? timeOf(event) : next ? timeOf(next) : undefined;
    if (to !== undefined) found.push(Math.max(0, to - from));
  });
  return found;
}

/** `npm run chaos`: the full suite, figures for the bench report. */
export async function chaosScenario(progress: (line: string) => void): Promise<Section> {
  const runs = Number(process.env.CAPSTAN_CHAOS_RUNS ?? 50);
  if (!Number.isInteger(runs) || runs < 1) throw new Error(`CAPSTAN_CHAOS_RUNS must be a positive integer`);
  const options: ChaosOptions = {
    runs,
    workers: 3,
    inFlight: 6,
    killEveryMs: 4000,
    maxKills: Math.max(4, Math.ceil(runs / 4)),
    targetedCrashes: Math.max(1, Math.round(runs / 10)),
    deadlineMs: 180_000 + runs * 8000,
  };
  const f = await runChaos(options, progress);
  const statuses = Object.entries(f.byStatus)
    .map(([status, n]) => `${status} ${n}`)
    .join(', ');
  return {
    title: 'chaos: workers killed while runs are in flight',
    setup:
      `${f.runs} runs (${options.inFlight} at a time) of sleep 800 ms → counter {key} → echo on 3 dev-flex workers (1 s heartbeat, 2 s lease, ` +
      `reconciler every 2 s); a random worker SIGKILLed every ${options.killEveryMs / 1000} s ` +
      `(${f.randomKills} kills) and ${f.targetedCrashes} workers crashing right after the counter's effect, ` +
      'before its receipt. Paused runs resolved by reading the counter: cancel if it took effect, retry if not.',
    measures: [
      { name: 'runs by final status', value: statuses, note: 'every run terminal' },
      {
        name: 'paused safely (LOST_NOT_SAFE_TO_RETRY)',
        value: String(f.pausedSafe),
        note: `then resolved: ${JSON.stringify(f.resolvedBy)}`,
      },
      { name: 'double effects', value: String(f.doubleEffects), note: 'must be 0 (a counter above 1)' },
      { name: 'lost effects', value: String(f.lostEffects), note: 'a succeeded run whose counter is 0' },
      { name: 'broken chains', value: String(f.brokenChains), note: 'verifyChain over every run' },
      { name: 'unfinished runs', value: String(f.unfinished), note: 'must be 0' },
      {
        name: 'recovery, kill to the next start',
        value: `p50 ${ms(percentile(f.recoveryMs, 50))}, max ${ms(percentile(f.recoveryMs, 100))}`,
        note: `${f.recoveryMs.length} lost step executions`,
      },
      { name: 'elapsed', value: `${fixed(f.elapsedMs / 1000, 1)} s` },
    ],
    data: { ...f },
    failures: [
      ...(f.doubleEffects > 0 ? [`${f.doubleEffects} double effects`] : []),
      ...(f.lostEffects > 0 ? [`${f.lostEffects} lost effects`] : []),
      ...(f.brokenChains > 0 ? [`${f.brokenChains} broken chains`] : []),
      ...(f.unfinished > 0 ? [`${f.unfinished} runs unfinished`] : []),
    ],
  };
}
