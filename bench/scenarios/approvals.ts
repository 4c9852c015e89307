import { WebSocket } from 'ws';
import type { RunEvent } from '../../shared/domain/events.js';
import { createRun, fixed, ms, percentile, register, type Scenario, sleep, startBenchStack } from '../support.js';

const TRIALS = Number(process.env.CAPSTAN_BENCH_APPROVALS ?? 30);

/**
 * Approvals: the time from the request that resolves a gate to `approval.resolved` arriving at a
 * WebSocket subscriber (target: within 2 s), over one-step runs whose critical step waits for one
 * approver.
 */
export const approvalsScenario: Scenario = async (progress) => {
  const bench = await startBenchStack({ workers: { 'dev-flex': 1 } });
  try {
    const { stack } = bench;
    const approver = stack.issuer.tokens.approver ?? '';
    await register(bench, {
      name: 'bench-gated',
      environment: 'dev',
      sandbox_profile: 'dev-flex',
      steps: [{ id: 'gated', backend: 'test', action: 'echo', params: { message: 'ok' }, critical: true }],
    });
    const latencies: number[] = [];
    for (let trial = 0; trial < TRIALS; trial++) {
      const runId = await createRun(bench, 'bench-gated');
      let approvalId: string | undefined;
      for (let waited = 0; !approvalId; waited += 50) {
        if (waited > 30_000) throw new Error(`run ${runId} never asked for approval`);
        await sleep(50);
        approvalId = (await bench.events(runId)).find((e) => e.type === 'approval.requested')?.payload.approvalId as
          string | undefined;
      }
      const socket = new WebSocket(`${stack.wsUrl}?token=${bench.token}`);
      const resolved = new Promise<number>((resolve) =>
        socket.on('message', (data: Buffer) => {
          const event = JSON.parse(data.toString()) as RunEvent;
          if (event.type === 'approval.resolved') resolve(Date.now());
        }),
      );
      const replayed = new Promise((resolve) => socket.once('message', resolve));
      await new Promise((resolve) => socket.once('open', resolve));
      socket.send(JSON.stringify({ action: 'subscribe', runId }));
      await replayed;
      const sent = Date.now();
      const reply = await bench.api(
        'POST',
        `/runs/${runId}/approvals/${approvalId}`,
        { decision: 'approve' },
        {},
        approver,
      );
      if (reply.status !== 200) throw new Error(`approving: ${reply.status} ${JSON.stringify(reply.body)}`);
      const arrived = await Promise.race([resolved, sleep(10_000).then(() => Number.NaN)]);
      socket.close();
      if (Number.isNaN(arrived)) throw new Error(`approval.resolved never reached the subscriber of ${runId}`);
      latencies.push(arrived - sent);
      if ((trial + 1) % 10 === 0) progress(`${trial + 1}/${TRIALS} approvals`);
    }
    return {
      title: 'Approvals',
      setup: `${TRIALS} runs, each with one critical step gated for one approver; one subscriber per run`,
      measures: [
        {
          name: 'decision to approval.resolved on the WebSocket, p50 / p99',
          value: `${ms(percentile(latencies, 50))} / ${ms(percentile(latencies, 99))}`,
          note: `target < 2 s; max ${fixed(Math.max(...latencies) / 1000)} s`,
        },
      ],
      data: { latencies },
    };
  } finally {
    await bench.close();
  }
};
