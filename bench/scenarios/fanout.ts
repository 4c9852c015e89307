import { GetExecutionHistoryCommand, SFNClient } from '@aws-sdk/client-sfn';
import { withoutSdkLogging } from '../../shared/adapters/aws-clients.js';
import { LOCAL_NAMES } from '../../local/stack.js';
import { totalOf } from '../../local/request-meter.js';
import { executionArnFor } from '../../shared/adapters/sfn.js';
import { type RunEvent, verifyChain } from '../../shared/domain/events.js';
import {
  type BenchStack,
  createRun,
  fixed,
  type Measure,
  pool,
  register,
  type Scenario,
  sleep,
  startBenchStack,
  timeOf,
} from '../support.js';

/** The fan-out sizes, and the one also run with `max_concurrency: 50`. */
const SIZES = (process.env.CAPSTAN_BENCH_FANOUT_SIZES ?? '10,100,1000').split(',').map(Number);
const LIMITED = { size: 1000, maxConcurrency: 50 };
const WORKERS = 4;
const RUN_TIMEOUT_MS = 20 * 60_000;

/** One fan-out run and what it cost. */
export interface FanoutCase {
  readonly label: string;
  readonly targets: number;
  readonly maxConcurrency?: number;
  readonly status: string;
  readonly wallMs: number;
  readonly transitions: number;
  readonly historyEvents: number;
  readonly events: number;
  readonly eventsPerSecond: number;
  readonly chainIntact: boolean;
  readonly chainBreak?: string;
  readonly succeededTargets: number;
  readonly dynamodb: Record<string, number>;
  readonly dynamodbRefused: Record<string, number>;
  readonly dynamodbPerTarget: number;
  /** Transactions the service refused (a lost race on the run's head, mostly) per event appended. */
  readonly refusedTransactionsPerEvent: number;
}

const nonZero = (counts: Record<string, number>) => Object.fromEntries(Object.entries(counts).filter(([, n]) => n > 0));

/** Nodes `node-0001` ... in group `n1000`; the first 100 also in `n100`, the first 10 in `n10`. */
async function declareNodes(bench: BenchStack, count: number, progress: (line: string) => void) {
  const admin = bench.stack.issuer.tokens.admin ?? '';
  const ids = Array.from({ length: count }, (_, i) => i + 1);
  progress(`declaring ${count} nodes`);
  await pool(ids, 16, async (n) => {
    const groups = SIZES.filter((size) => n <= size).map((size) => `n${size}`);
    const id = `node-${String(n).padStart(4, '0')}`;
    const reply = await bench.api(
      'PUT',
      `/inventory/nodes/${id}`,
      { groups, attributes: { host: `10.0.${Math.floor(n / 256)}.${n % 256}` } },
      {},
      admin,
    );
    if (reply.status >= 300) throw new Error(`declaring ${id}: ${reply.status} ${JSON.stringify(reply.body)}`);
  });
}

const runbookFor = (name: string, size: number, maxConcurrency?: number) => ({
  name,
  environment: 'dev',
  sandbox_profile: 'dev-flex',
  strategy: 'continue',
  steps: [
    {
      id: 'touch',
      backend: 'test',
      action: 'echo',
      params: { message: 'on {{ target.id }}' },
      target: { group: `n${size}` },
      ...(maxConcurrency !== undefined && { max_concurrency: maxConcurrency }),
    },
  ],
});

/** State transitions of a run's interpreter execution, from its `GetExecutionHistory`. */
async function historyOf(sfn: SFNClient, runId: string): Promise<{ events: number; transitions: number }> {
  const executionArn = executionArnFor(LOCAL_NAMES.stateMachineArn, runId);
  let events = 0;
  let transitions = 0;
  let nextToken: string | undefined;
  do {
    const page = await sfn.send(new GetExecutionHistoryCommand({ executionArn, maxResults: 1000, nextToken }));
    for (const event of page.events ?? []) {
      events++;
      if (event.type?.endsWith('StateEntered')) transitions++;
    }
    nextToken = page.nextToken;
  } while (nextToken);
  return { events, transitions };
}

/**
 * Waits for the run's interpreter execution to end, watching the local endpoint rather than the
 * API: the run detail reads every target's execution, which would count in the figures.
 */
async function untilEnded(bench: BenchStack, runId: string, progress: (line: string) => void): Promise<void> {
  const deadline = Date.now() + RUN_TIMEOUT_MS;
  let lastNote = Date.now();
  while (bench.stack.stepFunctions.running > 0) {
    if (Date.now() > deadline) throw new Error(`run ${runId} still running after ${RUN_TIMEOUT_MS / 1000} s`);
    if (Date.now() - lastNote > 15_000) {
      lastNote = Date.now();
      const readings = await bench.stack.meters?.dynamodb.read();
      progress(`  still running: ${JSON.stringify(nonZero({ ...readings?.counts }))}`);
    }
    await sleep(200);
  }
}

/** Runs one fan-out and measures it; the stack's meters are reset first. */
async function measureCase(
  bench: BenchStack,
  sfn: SFNClient,
  label: string,
  size: number,
  progress: (line: string) => void,
  maxConcurrency?: number,
): Promise<FanoutCase> {
  const meter = bench.stack.meters?.dynamodb;
  if (!meter) throw new Error('the stack was started without request meters');
  const name = `fanout-${size}${maxConcurrency === undefined ? '' : `-mc${maxConcurrency}`}`;
  await register(bench, runbookFor(name, size, maxConcurrency));
  await meter.reset();
  progress(`${label}: one step over ${size} nodes`);
  const startedAt = Date.now();
  const runId = await createRun(bench, name);
  await untilEnded(bench, runId, progress);
  const wallMs = Date.now() - startedAt;
  // Read before the detail and the events are fetched, which the figures must not count.
  const readings = await meter.read();
  const dynamodb = nonZero({ ...readings.counts });
  const dynamodbRefused = nonZero({ ...readings.failures });
  const status = String((await bench.api('GET', `/runs/${runId}`)).body.status);
  const events = await bench.events(runId);
  const chain = verifyChain(events);
  const history = await historyOf(sfn, runId);
  const first = events[0];
  const last = events.at(-1);
  const spanS = first && last ? Math.max(1, timeOf(last) - timeOf(first)) / 1000 : Number.NaN;
  const succeededTargets = events.filter((e: RunEvent) => e.type === 'step.succeeded' && e.targetId).length;
  const result: FanoutCase = {
    label,
    targets: size,
    ...(maxConcurrency !== undefined && { maxConcurrency }),
    status,
    wallMs,
    transitions: history.transitions,
    historyEvents: history.events,
    events: events.length,
    eventsPerSecond: events.length / spanS,
    chainIntact: chain.valid && events.every((e, i) => e.seq === i + 1),
    ...(!chain.valid && { chainBreak: JSON.stringify(chain) }),
    succeededTargets,
    dynamodb,
    dynamodbRefused,
    dynamodbPerTarget: totalOf(dynamodb) / size,
    refusedTransactionsPerEvent: (dynamodbRefused.TransactWriteItems ?? 0) / events.length,
  };
  progress(
    `${label}: ${status} in ${fixed(wallMs / 1000, 1)} s, ${result.transitions} transitions, ${events.length} events, ` +
      `${fixed(result.dynamodbPerTarget, 1)} DynamoDB requests per target`,
  );
  return result;
}

const describeCase = (c: FanoutCase): Measure[] => [
  {
    name: `${c.label}: run, wall time`,
    value: `${c.status}, ${fixed(c.wallMs / 1000, 1)} s`,
    note: `${c.succeededTargets}/${c.targets} targets succeeded; create to the interpreter's end`,
  },
  {
    name: `${c.label}: Step Functions state transitions`,
    value: String(c.transitions),
    note: `${c.historyEvents} history events (GetExecutionHistory)`,
  },
  {
    name: `${c.label}: DynamoDB requests per target`,
    value: fixed(c.dynamodbPerTarget),
    note: JSON.stringify(c.dynamodb),
  },
  {
    name: `${c.label}: events appended per second`,
    value: fixed(c.eventsPerSecond, 1),
    note: `${c.events} events, first to last timestamp; chain ${c.chainIntact ? 'intact (verifyChain, seq gap-free)' : `BROKEN ${c.chainBreak ?? ''}`}`,
  },
  {
    name: `${c.label}: transactions refused per event`,
    value: fixed(c.refusedTransactionsPerEvent),
    note:
      `refused requests ${JSON.stringify(c.dynamodbRefused)}: a refused transaction lost the race on the run's head ` +
      '(re-read and retried); a refused UpdateItem is a result claiming a completion before the aggregate is full',
  },
];

/**
 * One `test.echo` step over 10, 100 and 1,000 declared nodes with four dev-flex workers, and over
 * 1,000 with `max_concurrency: 50`: the interpreter's transitions per run (which must not grow with
 * the targets), wall time, DynamoDB requests per target, events appended per second, and whether
 * the largest run's event chain verifies.
 */
export const fanoutScenario: Scenario = async (progress) => {
  const bench = await startBenchStack({ workers: { 'dev-flex': WORKERS } });
  const sfn = withoutSdkLogging(
    new SFNClient({
      endpoint: bench.stack.stepFunctions.endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    }),
  );
  try {
    const largest = Math.max(...SIZES);
    await declareNodes(bench, largest, progress);
    const cases: FanoutCase[] = [];
    for (const size of SIZES) cases.push(await measureCase(bench, sfn, `${size} targets`, size, progress));
    if (SIZES.includes(LIMITED.size))
      cases.push(
        await measureCase(
          bench,
          sfn,
          `${LIMITED.size} targets, max_concurrency ${LIMITED.maxConcurrency}`,
          LIMITED.size,
          progress,
          LIMITED.maxConcurrency,
        ),
      );

    const failures: string[] = [];
    const transitions = new Set(cases.map((c) => c.transitions));
    if (transitions.size !== 1) failures.push(`state transitions differ across sizes: ${[...transitions].join(', ')}`);
    for (const c of cases) {
      if (c.status !== 'succeeded') failures.push(`${c.label} ended ${c.status}`);
      if (!c.chainIntact) failures.push(`${c.label}: the event chain does not verify`);
      if (c.succeededTargets !== c.targets) failures.push(`${c.label}: ${c.succeededTargets}/${c.targets} succeeded`);
    }
    return {
      title: 'Fanout: one step over many declared nodes',
      setup:
        `one test.echo step over ${SIZES.join(', ')} declared nodes (and ${LIMITED.size} with max_concurrency ${LIMITED.maxConcurrency}), ` +
        `${WORKERS} dev-flex workers, one run at a time on a fresh local stack, requests counted at the local DynamoDB endpoint`,
      measures: [
        {
          name: 'state transitions identical across sizes',
          value: transitions.size === 1 ? `yes (${[...transitions].join('')} per run)` : 'no',
          note: cases.map((c) => `${c.label}: ${c.transitions}`).join('; '),
        },
        ...cases.flatMap(describeCase),
      ],
      data: { workers: WORKERS, cases },
      ...(failures.length > 0 && { failures }),
    };
  } finally {
    sfn.destroy();
    await bench.close();
  }
};
