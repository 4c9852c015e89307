/**
 * Takes the screenshots in docs/console.md: starts a local stack in a temporary directory, makes
 * two agent nodes and a declared one, a few runs (one waiting on two approvers with one approval,
 * one paused after a rejection, one done, one fanned out over group web), and photographs every console screen at 1280x800 and at phone width with the system
 * Chromium. `npm run console:screenshots`.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { startLocalStack } from '../local/stack.js';
import { launchChromium } from '../test/support/browser.js';
import { freePortBlock } from '../test/support/local-dynamodb.js';
import { callApi, until } from '../test/support/stack-api.js';

const OUT = join(import.meta.dirname, '..', 'docs', 'console');
const home = mkdtempSync(join(tmpdir(), 'capstan-screens-'));
const stack = await startLocalStack({
  port: await freePortBlock(),
  stateDir: home,
  fresh: true,
  workers: { 'dev-flex': 1, 'prod-standard': 1 },
  agents: [
    { nodeId: 'web-1', groups: ['web'], profile: 'dev-flex', attributes: { zone: 'eu-west-1a' } },
    { nodeId: 'web-2', groups: ['web', 'canary'], profile: 'dev-flex', attributes: { zone: 'eu-west-1b' } },
  ],
  reconcileIntervalMs: 600_000,
  log: () => undefined,
});
const token = (who: string) => stack.issuer.tokens[who] ?? '';
const api = (who: string, method: string, path: string, body?: unknown) =>
  callApi(stack.restUrl, token(who), method, path, body);
const settled = (runId: string, wanted: string[]) =>
  until(`run ${runId} to be ${wanted.join('/')}`, async () => {
    const { body } = await api('operator', 'GET', `/runs/${runId}`);
    return wanted.includes(String(body.status)) ? body : undefined;
  });
const start = async (runbookId: string, who: string, ticket?: string) =>
  String(
    (await api(who, 'POST', '/runs', { runbookId, ...(ticket && { ticket: { id: ticket, source: 'jira' } }) })).body
      .runId,
  );

try {
  await api('operator', 'POST', '/runbooks', {
    name: 'rotate-db-password',
    environment: 'prod',
    sandbox_profile: 'prod-standard',
    steps: [
      { id: 'snapshot', backend: 'test', action: 'echo', params: { message: 'snapshot taken' } },
      { id: 'rotate', backend: 'test', action: 'echo', params: { message: 'password rotated' }, blast_radius: 'high' },
    ],
  });
  await api('operator', 'POST', '/runbooks', {
    name: 'switch-traffic',
    environment: 'dev',
    sandbox_profile: 'dev-flex',
    steps: [
      {
        id: 'prepare',
        backend: 'test',
        action: 'echo',
        params: { message: 'prepared' },
        rollback: { backend: 'test', action: 'echo', params: { message: 'unprepared' } },
      },
      { id: 'switch', backend: 'test', action: 'echo', params: { message: 'switched' }, critical: true },
    ],
  });
  await api('admin', 'PUT', '/inventory/nodes/db-1', {
    groups: ['db'],
    attributes: { host: '10.0.4.17', port: '5432' },
  });
  await api('operator', 'POST', '/runbooks', {
    name: 'restart-web',
    environment: 'dev',
    sandbox_profile: 'dev-flex',
    steps: [
      {
        id: 'restart',
        backend: 'test',
        action: 'echo',
        params: { message: 'nginx restarted on {{ target.id }} ({{ target.attributes.zone }})' },
        target: { group: 'web' },
      },
    ],
  });
  await until('both agent nodes online', async () => {
    const { body } = await api('operator', 'GET', '/inventory?group=web');
    const nodes = body.nodes as Array<{ status: string }>;
    return nodes.length === 2 && nodes.every((n) => n.status === 'online') ? true : undefined;
  });
  const fanout = await start('restart-web', 'operator', 'CHG-12');
  await settled(fanout, ['succeeded']);
  const done = await start('switch-traffic', 'operator', 'OPS-101');
  await settled(done, ['waiting_for_approval']);
  const first = (await api('operator', 'GET', `/runs/${done}`)).body.waitingFor as { approvalId: string };
  await api('approver', 'POST', `/runs/${done}/approvals/${first.approvalId}`, { decision: 'approve' });
  await settled(done, ['succeeded']);
  const paused = await start('switch-traffic', 'operator', 'OPS-102');
  await settled(paused, ['waiting_for_approval']);
  const gate = (await api('operator', 'GET', `/runs/${paused}`)).body.waitingFor as { approvalId: string };
  await api('approver', 'POST', `/runs/${paused}/approvals/${gate.approvalId}`, {
    decision: 'reject',
    notes: 'not during the freeze',
  });
  await settled(paused, ['paused']);
  const waiting = await start('rotate-db-password', 'admin', 'INC-7');
  await settled(waiting, ['waiting_for_approval']);
  const twoKey = (await api('operator', 'GET', `/runs/${waiting}`)).body.waitingFor as { approvalId: string };
  await api('approver', 'POST', `/runs/${waiting}/approvals/${twoKey.approvalId}`, {
    decision: 'approve',
    notes: 'backup verified',
  });

  // Written over the old ones, so a run that fails part-way leaves every screen with a picture.
  mkdirSync(OUT, { recursive: true });
  const browser = await launchChromium();
  const base = stack.restUrl.replace(/\/v1$/, '/');
  for (const [size, viewport] of [
    ['desktop', { width: 1280, height: 800 }],
    ['phone', { width: 390, height: 844 }],
  ] as const) {
    const shoot = async (page: Page, name: string) =>
      page.screenshot({ path: join(OUT, `${name}-${size}.png`), fullPage: size === 'phone' });
    // Navigating before the sign-in has finished would land on the sign-in page.
    const signedIn = (page: Page) => page.getByRole('button', { name: 'Sign out' }).waitFor();
    const context = await browser.newContext({ viewport, deviceScaleFactor: 1 });
    const page = await context.newPage();
    await page.goto(base);
    await page.locator('button[data-identity]').first().waitFor();
    await shoot(page, 'sign-in');
    await page.locator('button[data-identity="approver2"]').click();
    await page.locator('table.runs').waitFor();
    await shoot(page, 'runs');
    await page.goto(`${base}#/runs/${waiting}`);
    await page.getByTestId('quorum').waitFor();
    await page.locator('li[data-step="snapshot"] button').click();
    await page.getByTestId('output').getByText('snapshot taken').waitFor();
    await shoot(page, 'workspace');
    await page.goto(`${base}#/approvals`);
    await page.locator('.inbox').waitFor();
    await shoot(page, 'approvals');
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.locator('button[data-identity="operator"]').click();
    await signedIn(page);
    await page.goto(`${base}#/runs/${paused}`);
    await page.getByTestId('reason').waitFor();
    await page.getByRole('button', { name: 'Resume: rollback' }).waitFor();
    await shoot(page, 'workspace-paused');
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.locator('button[data-identity="admin"]').click();
    await signedIn(page);
    await page.goto(`${base}#/workers`);
    await page.locator('tr[data-worker]').first().waitFor();
    await shoot(page, 'workers');
    await page.goto(`${base}#/inventory`);
    await page.locator('tr[data-node="db-1"]').waitFor();
    await page.getByText('Declare a node').click();
    await shoot(page, 'inventory');
    await page.goto(`${base}#/runs/${fanout}`);
    await page.locator('li[data-step="restart"] > button').click();
    await page.getByRole('button', { name: "Show web-2's output and events" }).click();
    await page
      .getByTestId('output')
      .getByText(/nginx restarted on web-2/)
      .waitFor();
    await shoot(page, 'workspace-fanout');
    await context.close();
  }
  await browser.close();
  console.log(`screenshots written to ${OUT}`);
} finally {
  await stack.stop();
  rmSync(home, { recursive: true, force: true });
}
// The Step Functions interpreter keeps a timer for each Task state's TimeoutSeconds until the task
// settles, and the tasks of executions aborted at stop (runs left waiting on a gate) never do: end
// the script here instead of waiting days for those timers.
process.exit(process.exitCode ?? 0);
