import { invocationCounts } from '../../local/lambdas.js';
import { totalOf } from '../../local/request-meter.js';
import type { RunEvent } from '../../shared/domain/events.js';
import {
  type BenchStack,
  cpuMs,
  createRun,
  devFlexSlots,
  fixed,
  ms,
  percentile,
  pool,
  processCpuMs,
  register,
  type Scenario,
  settle,
  startBenchStack,
  stepsAtOnce,
  timeOf,
} from '../support.js';

const RUNS = Number(process.env.CAPSTAN_BENCH_RUNS ?? 200);
/**
 * Runs before the measured ones, not counted: the local DynamoDB is a fresh JVM whose JIT compiler
 * takes about a core for its first minute, which a DynamoDB table in AWS never does.
 */
const WARMUP_RUNS = Number(process.env.CAPSTAN_BENCH_WARMUP_RUNS ?? RUNS);
const STEPS = 3;
const CONCURRENT_CREATES = 20;

const NOOP_RUNBOOK = {
  name: 'bench-noop',
  environment: 'dev',
  sandbox_profile: 'dev-flex',
  steps: Array.from({ length: STEPS }, (_, i) => ({
    id: `noop-${i + 1}`,
    backend: 'test',
    action: 'echo',
    params: { message: '' },
  })),
};

/** Latencies and runs per second of a set of runs, from their event logs. */
function throughput(logs: readonly (readonly RunEvent[])[]) {
  const measured = logs.map(latencies);
  const firstCreate = Math.min(...logs.map((events) => timeOf(events[0] as RunEvent)));
  const lastEnd = Math.max(...logs.map((events) => timeOf(events.at(-1) as RunEvent)));
  return {
    createToDispatch: measured.map((m) => m.createToDispatch),
    dispatchToStart: measured.flatMap((m) => m.dispatchToStart),
    runsPerSecond: logs.length / ((lastEnd - firstCreate) / 1000),
  };
}

interface CpuSnapshot {
  readonly stack: number;
  readonly meter: number;
  readonly dynamodb: number | undefined;
  /** Per worker process; one started during the measure counts from zero. */
  readonly workers: ReadonlyMap<number, number>;
}

/** CPU used so far by the bench's process (less the request meter's threads), DynamoDB Local and the workers. */
async function cpuSnapshot(bench: BenchStack): Promise<CpuSnapshot> {
  const { stack } = bench;
  const meters = stack.meters ? [stack.meters.dynamodb, stack.meters.sqs] : [];
  const meter = (await Promise.all(meters.map(async (m) => cpuMs(await m.cpuUsage())))).reduce((a, b) => a + b, 0);
  const workers = new Map<number, number>();
  for (const pid of stack.workers.pids) {
    const used = processCpuMs(pid);
    if (used !== undefined) workers.set(pid, used);
  }
  return {
    stack: cpuMs(process.cpuUsage()) - meter,
    meter,
    dynamodb: processCpuMs(stack.dynamoDbPid),
    workers,
  };
}

/** CPU per run between two snapshots, part by part (`?` where a part could not be read). */
function cpuPerRun(before: CpuSnapshot, after: CpuSnapshot, runs: number) {
  const per = (used: number | undefined) => (used === undefined ? '?' : `${fixed(used / runs, 1)} ms`);
  const workers = [...after.workers].reduce((total, [pid, used]) => total + used - (before.workers.get(pid) ?? 0), 0);
  return [
    per(after.stack - before.stack),
    per(after.meter - before.meter),
    per(after.dynamodb === undefined || before.dynamodb === undefined ? undefined : after.dynamodb - before.dynamodb),
    per(after.workers.size === 0 ? undefined : workers),
  ].join(', ');
}

/** Per-run latencies from its event log. */
function latencies(events: readonly RunEvent[]) {
  const created = events.find((e) => e.type === 'run.created');
  const dispatched = events.filter((e) => e.type === 'step.dispatched');
  const started = events.filter((e) => e.type === 'step.started');
  const firstDispatch = dispatched[0];
  if (!created || !firstDispatch) throw new Error(`run ${events[0]?.runId ?? '?'} was never dispatched`);
  const dispatchToStart = started.flatMap((start) => {
    const dispatch = dispatched.find((d) => d.stepId === start.stepId && d.payload.attempt === start.payload.attempt);
    return dispatch ? [timeOf(start) - timeOf(dispatch)] : [];
  });
  return {
    createToDispatch: timeOf(firstDispatch) - timeOf(created),
    dispatchToStart,
  };
}

function perStep(counts: Record<string, number>, steps: number) {
  return Object.fromEntries(
    Object.entries(counts)
      .filter(([, n]) => n > 0)
      .sort(([, a], [, b]) => b - a)
      .map(([op, n]) => [op, Number(fixed(n / steps))]),
  );
}

/**
 * 200 runs of a three-step no-op runbook on the local stack with two workers: how fast a run
 * reaches its first dispatch and a step its worker, how many runs per second, and what each
 * step costs in Step Functions transitions, Lambda invocations, DynamoDB and SQS requests.
 */
export const runsScenario: Scenario = async (progress) => {
  const bench = await startBenchStack({ workers: { 'dev-flex': 2 } });
  try {
    const { stack } = bench;
    const meters = stack.meters;
    if (!meters) throw new Error('the stack was started without request meters');
    await register(bench, NOOP_RUNBOOK);
    progress(`warming up: ${WARMUP_RUNS} runs, not counted`);
    const warmupIds = await pool(
      Array.from({ length: Math.max(1, WARMUP_RUNS) }, (_, i) => i),
      CONCURRENT_CREATES,
      () => createRun(bench, 'bench-noop'),
    );
    await settle(bench, 600_000, progress);
    const cold = throughput(await pool(warmupIds, 10, (runId) => bench.events(runId)));

    for (const key of Object.keys(invocationCounts)) invocationCounts[key] = 0;
    await meters.dynamodb.reset();
    await meters.sqs.reset();
    const transitionsBefore = stack.stepFunctions.counters.stateTransitions;
    const cpuBefore = await cpuSnapshot(bench);

    progress(`creating ${RUNS} runs (${CONCURRENT_CREATES} at a time)`);
    const startedAt = Date.now();
    const runIds = await pool(
      Array.from({ length: RUNS }, (_, i) => i),
      CONCURRENT_CREATES,
      () => createRun(bench, 'bench-noop'),
    );
    await settle(bench, 600_000, progress);
    const wallMs = Date.now() - startedAt;
    const cpuAfter = await cpuSnapshot(bench);

    const dynamodbReadings = await meters.dynamodb.read();
    const dynamodb = dynamodbReadings.counts;
    const dynamodbLatency = Object.fromEntries(
      // An operation seen only before the reset has no times.
      Object.entries(dynamodbReadings.latencies)
        .filter(([, times]) => times.length > 0)
        .map(([op, times]) => [
          op,
          { p50: Number(fixed(percentile(times, 50), 1)), p99: Number(fixed(percentile(times, 99), 1)) },
        ]),
    );
    const byKey = Object.entries(dynamodbReadings.byKey)
      .filter(([, n]) => n > 0)
      .sort(([, a], [, b]) => b - a);
    const sqs = Object.fromEntries(
      Object.entries((await meters.sqs.read()).counts).filter(([op]) => !op.startsWith('S3 ')),
    );
    const lambdas = { ...invocationCounts };
    const transitions = stack.stepFunctions.counters.stateTransitions - transitionsBefore;

    progress('reading the event logs');
    const logs = await pool(runIds, 10, (runId) => bench.events(runId));
    const statuses: Record<string, number> = {};
    for (const events of logs) {
      const last = events.at(-1)?.type ?? 'none';
      statuses[last] = (statuses[last] ?? 0) + 1;
    }
    const { createToDispatch, dispatchToStart, runsPerSecond } = throughput(logs);
    const steps = RUNS * STEPS;

    return {
      title: 'Runs end to end',
      setup: `${RUNS} runs of a ${STEPS}-step no-op runbook (test.echo), created ${CONCURRENT_CREATES} at a time after ${warmupIds.length} warm-up runs, two dev-flex workers (${stepsAtOnce(devFlexSlots())} at once each), requests counted at the local DynamoDB and SQS endpoints`,
      measures: [
        {
          name: 'runs ended',
          value: Object.entries(statuses)
            .map(([t, n]) => `${n} ${t}`)
            .join(', '),
        },
        {
          name: 'create-to-dispatch p50 / p99',
          value: `${ms(percentile(createToDispatch, 50))} / ${ms(percentile(createToDispatch, 99))}`,
          note: "from `run.created` to the first `step.dispatched`: admission, the interpreter's start, Plan, and Dispatch's read of the run (`run.started` now commits with the first dispatch)",
        },
        {
          name: 'step dispatch-to-start p50 / p99',
          value: `${ms(percentile(dispatchToStart, 50))} / ${ms(percentile(dispatchToStart, 99))}`,
          note: "includes the queue wait: every run is in flight at once and each worker runs its profile's stepsPerWorker steps at a time",
        },
        {
          name: 'runs per second',
          value: fixed(runsPerSecond),
          note: `first create to last run end; wall ${fixed(wallMs / 1000, 1)} s`,
        },
        {
          name: 'warm-up: runs per second, create-to-dispatch p50 / p99',
          value: `${fixed(cold.runsPerSecond)}; ${ms(percentile(cold.createToDispatch, 50))} / ${ms(percentile(cold.createToDispatch, 99))}`,
          note: `the ${warmupIds.length} runs before, on a local DynamoDB just started (its JIT compiler still busy)`,
        },
        {
          name: 'CPU per run: stack, request meter, DynamoDB Local, workers',
          value: cpuPerRun(cpuBefore, cpuAfter, RUNS),
          note: "over the measured runs, user + system; the stack is this process's CPU less the meter's threads (its handlers, the interpreter, the stream mappings, fauxqs and the bench's own client); less noisy than the latencies, which the machine's other load moves",
        },
        { name: 'Step Functions state transitions per step', value: fixed(transitions / steps) },
        {
          name: 'Lambda invocations per step',
          value: fixed(totalOf(lambdas) / steps),
          note: JSON.stringify(perStep(lambdas, steps)),
        },
        {
          name: 'DynamoDB requests per step',
          value: fixed(totalOf(dynamodb) / steps),
          note: JSON.stringify(perStep(dynamodb, steps)),
        },
        {
          name: 'DynamoDB requests per step, the ten largest by key',
          value: fixed(byKey.slice(0, 10).reduce((total, [, n]) => total + n, 0) / steps),
          note: byKey
            .slice(0, 10)
            .map(([label, n]) => `${label}: ${fixed(n / steps)}`)
            .join('; '),
        },
        {
          name: 'DynamoDB request latency p50 / p99, writes',
          value: (['TransactWriteItems', 'UpdateItem'] as const)
            .map((op) => `${op} ${dynamodbLatency[op]?.p50 ?? '?'} / ${dynamodbLatency[op]?.p99 ?? '?'} ms`)
            .join('; '),
          note: "through the request meter, a thread of the stack's process (its own event loop, so the handlers' do not delay it; refused conditional writes count); DynamoDB Local holds one lock over all its tables from a write's start to its commit, so writes wait for each other (on disk, for the file too)",
        },
        {
          name: 'SQS requests per step',
          value: fixed(totalOf(sqs) / steps),
          note: `${JSON.stringify(perStep(sqs, steps))}; idle long polls included`,
        },
      ],
      data: {
        runs: RUNS,
        steps,
        statuses,
        createToDispatch,
        dispatchToStart,
        wallMs,
        runsPerSecond,
        transitions,
        lambdas,
        dynamodb,
        dynamodbByKey: Object.fromEntries(byKey),
        dynamodbLatency,
        sqs,
      },
    };
  } finally {
    await bench.close();
  }
};
