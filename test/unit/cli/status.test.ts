import { describe, expect, it } from 'vitest';
import { runCli } from '../../../cli/main.js';

const FIGURES = {
  tenantId: 'acme',
  at: '2026-01-01T00:00:00.000Z',
  runs: {
    byStatus: {
      queued: 0,
      throttled: 0,
      running: 2,
      waiting_for_approval: 1,
      paused: 0,
      rolling_back: 0,
      succeeded: 5,
      failed: 1,
      cancelled: 0,
    },
    counted: 9,
    complete: true,
  },
  approvals: { waiting: 1, oldestWaitingSeconds: 95 },
  failures: { lastHour: 1 },
  queues: { 'dev-flex': 3 },
  workers: { idle: 1, busy: 2, draining: 0, offline: 0, dead: 0, deregistered: 0 },
};

async function status(argv: string[]) {
  const out: string[] = [];
  const paths: string[] = [];
  const code = await runCli(['status', ...argv], {
    env: { CAPSTAN_URL: 'http://api.test', CAPSTAN_TOKEN: 'tok' },
    cwd: '/nowhere',
    isTTY: false,
    write: (t) => out.push(t),
    writeError: () => undefined,
    fetch: (async (input: string | URL | Request) => {
      paths.push(new URL(String(input)).pathname);
      return new Response(JSON.stringify(FIGURES), { status: 200 });
    }) as typeof fetch,
  });
  return { code, out: out.join(''), paths };
}

describe('capstan status', () => {
  it('shows the runs by status, the waiting approvals with the oldest age, failures, queues and workers', async () => {
    const { code, out, paths } = await status([]);
    expect(code).toBe(0);
    expect(paths).toEqual(['/v1/dashboard/metrics']);
    expect(out).toMatch(/succeeded\s+5/);
    expect(out).toMatch(/waiting_for_approval\s+1/);
    expect(out).not.toMatch(/cancelled/);
    expect(out).toContain('approvals waiting: 1 (oldest 1m35s)');
    expect(out).toContain('failed in the last hour: 1');
    expect(out).toMatch(/dev-flex\s+3/);
    expect(out).toMatch(/busy\s+2/);
  });

  it('prints the API answer as it is with --json', async () => {
    const { code, out } = await status(['--json']);
    expect(code).toBe(0);
    expect(JSON.parse(out)).toEqual(FIGURES);
  });
});
