import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalStack } from '../../local/stack.js';
import { launchChromium, seriousA11yViolations } from '../support/browser.js';
import { callApi, until as waitUntil } from '../support/stack-api.js';
import { startTestStack, stopTestStack } from '../support/test-stack.js';

/**
 * The console's inventory screen and a fan-out run's targets, in a real browser (the system
 * Chromium) against a local stack with two agent nodes of group `web`.
 */
let stack: LocalStack | undefined;
let home: string | undefined;
let consoleUrl: string;
let browser: Browser;
const contexts: BrowserContext[] = [];
const log: string[] = [];

beforeAll(async () => {
  ({ stack, home } = await startTestStack('console-fanout', {
    workers: { 'dev-flex': 1, 'prod-standard': 0, 'prod-critical': 0, 'staging-standard': 0 },
    agents: [
      { nodeId: 'web-1', groups: ['web'], profile: 'dev-flex', attributes: { zone: 'a' } },
      { nodeId: 'web-2', groups: ['web'], profile: 'dev-flex', attributes: { zone: 'b' } },
    ],
    reconcileIntervalMs: 3_600_000,
    env: { CAPSTAN_WORKER_HEARTBEAT_SECONDS: '2' },
    log: (line) => log.push(line),
  }));
  consoleUrl = running().restUrl.replace(/\/v1$/, '/');
  browser = await launchChromium();
  await until('both agent nodes online', async () => {
    const { nodes } = (await api('operator', 'GET', '/inventory?group=web')).body as {
      nodes: Array<{ status: string }>;
    };
    return nodes.length === 2 && nodes.every((n) => n.status === 'online') ? true : undefined;
  });
}, 120_000);

afterAll(async () => {
  for (const context of contexts) await context.close();
  await browser?.close();
  await stopTestStack(stack, home);
});

const running = () => {
  if (!stack) throw new Error('the stack did not start');
  return stack;
};
const api = (as: string, method: string, path: string, body?: unknown) =>
  callApi(running().restUrl, running().issuer.tokens[as] ?? '', method, path, body);
const until = <T>(what: string, probe: () => Promise<T | undefined>) =>
  waitUntil(what, probe, 30_000, () => log.slice(-30).join('\n'));
const nodeIds = async () =>
  ((await api('operator', 'GET', '/inventory')).body.nodes as Array<{ id: string }>).map((n) => n.id);

/** A new browser context (its own session) signed in as one development identity. */
async function signedIn(who: string, viewport = { width: 1280, height: 800 }): Promise<Page> {
  const context = await browser.newContext({ viewport });
  contexts.push(context);
  const page = await context.newPage();
  await page.goto(consoleUrl);
  await page.locator(`button[data-identity="${who}"]`).click();
  await page.getByRole('heading', { name: 'Runs', level: 1 }).waitFor();
  return page;
}

async function runToEnd(runbookId: string, ticket?: string): Promise<string> {
  const created = await api('operator', 'POST', '/runs', {
    runbookId,
    ...(ticket && { ticket: { id: ticket, source: 'jira' } }),
  });
  expect(created.status, JSON.stringify(created.body)).toBe(202);
  const runId = String(created.body.runId);
  await until(`run ${runId} to succeed`, async () => {
    const { body } = await api('operator', 'GET', `/runs/${runId}`);
    return body.status === 'succeeded' ? true : undefined;
  });
  return runId;
}

describe('the console inventory and fan-out', () => {
  it('lists the agent nodes of the stack by group, and lets an admin declare a node and remove it after a confirmation', async () => {
    const admin = await signedIn('admin');
    await admin.getByRole('link', { name: 'Inventory' }).click();
    const web = admin.locator('section[data-group="web"]');
    await web.locator('tr[data-node="web-2"]').waitFor();
    expect(await web.locator('tr[data-node]').count()).toBe(2);
    const agent = web.locator('tr[data-node="web-1"]');
    expect(await agent.innerText()).toMatch(/online[\s\S]*agent[\s\S]*ago[\s\S]*zone[\s\S]*a/);
    expect(await agent.getByRole('button').count()).toBe(0);

    await admin.getByText('Declare a node').click();
    await admin.getByLabel('Node id').fill('db-1');
    await admin.getByLabel('Groups (comma separated)').fill('db, eu');
    await admin.getByLabel('Attributes (one key=value a line)').fill('host=10.0.0.9\nport=5432');
    await admin.getByRole('button', { name: 'Declare', exact: true }).click();
    const declared = admin.locator('section[data-group="db"] tr[data-node="db-1"]');
    await declared.waitFor();
    expect(await declared.innerText()).toMatch(/online[\s\S]*declared[\s\S]*host[\s\S]*10\.0\.0\.9/);
    expect(await admin.locator('section[data-group="eu"] tr[data-node="db-1"]').count()).toBe(1);
    expect(await nodeIds()).toContain('db-1');

    // The group filter asks the server for one group's nodes.
    const asked = admin.waitForRequest((r) => r.url().includes('/v1/inventory?group=db'));
    await admin.getByRole('combobox', { name: 'Group' }).selectOption('db');
    await asked;
    await admin.locator('section[data-group="web"]').waitFor({ state: 'detached' });
    expect(await admin.locator('section[data-group]').count()).toBe(1);

    await declared.getByRole('button', { name: 'Remove db-1' }).click();
    const dialog = admin.getByRole('dialog', { name: 'Remove db-1' });
    await dialog.getByRole('button', { name: 'Keep it' }).click();
    expect(await nodeIds()).toContain('db-1');
    await declared.getByRole('button', { name: 'Remove db-1' }).click();
    await dialog.getByRole('button', { name: 'Yes, remove it' }).click();
    await admin.getByText('No node is in group db.').waitFor();
    expect(await nodeIds()).not.toContain('db-1');
  });

  it('offers an operator neither the declare form nor a remove button', async () => {
    expect((await api('admin', 'PUT', '/inventory/nodes/web-db', { groups: ['web'] })).status).toBe(201);
    const operator = await signedIn('operator');
    await operator.goto(`${consoleUrl}#/inventory`);
    await operator.locator('section[data-group="web"] tr[data-node="web-db"]').waitFor();
    expect(await operator.getByText('Declare a node').count()).toBe(0);
    expect(await operator.getByRole('button', { name: /^Remove/ }).count()).toBe(0);
    expect((await api('admin', 'DELETE', '/inventory/nodes/web-db')).status).toBe(200);
  });

  it("shows a fan-out step's expected targets and counts, and a selected target's own output and events", async () => {
    const registered = await api('operator', 'POST', '/runbooks', {
      name: 'console-fanout',
      environment: 'dev',
      sandbox_profile: 'dev-flex',
      steps: [
        {
          id: 'greet',
          backend: 'test',
          action: 'echo',
          params: { message: 'hello from {{ target.id }} in zone {{ target.attributes.zone }}' },
          target: { group: 'web' },
        },
      ],
    });
    expect(registered.status, JSON.stringify(registered.body)).toBeLessThan(300);
    const runId = await runToEnd('console-fanout');

    const page = await signedIn('operator');
    await page.goto(`${consoleUrl}#/runs/${runId}`);
    await page.locator('#run-title').getByText('succeeded').waitFor();
    await page.locator('li[data-step="greet"] > button').click();
    const counts = page.getByTestId('counts-greet');
    await counts.getByText('2 targets').waitFor();
    await counts.locator('li[data-status="succeeded"]').getByText('2 succeeded').waitFor();
    const rows = page.getByTestId('targets').locator('tr[data-target]');
    expect(await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-target')))).toEqual([
      'web-1',
      'web-2',
    ]);
    expect(await rows.nth(1).innerText()).toMatch(/succeeded\s+1/);

    await page.getByRole('button', { name: "Show web-2's output and events" }).click();
    await page.getByRole('heading', { name: 'Step greet on web-2' }).waitFor();
    await page.getByTestId('output').getByText('hello from web-2 in zone b').waitFor();
    expect(await page.getByTestId('output').innerText()).not.toContain('web-1');
    const timeline = page.getByTestId('timeline').locator('li');
    await page.getByTestId('timeline').locator('li[data-type="step.succeeded"]').waitFor();
    const lines = await timeline.allInnerTexts();
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.every((line) => line.includes('[web-2]'))).toBe(true);

    await page.getByRole('button', { name: 'Show every target' }).click();
    await page.getByTestId('output').getByText('hello from web-1 in zone a').waitFor();
  });

  it("finds a ticket's runs through the server's ticket filter", async () => {
    const mine = await runToEnd('console-fanout', 'OPS-77');
    const other = await runToEnd('console-fanout', 'OPS-78');
    const page = await signedIn('operator');
    await page.locator(`tr[data-run="${other}"]`).waitFor();
    const asked = page.waitForRequest((r) => r.url().includes('ticket=OPS-77'));
    await page.getByLabel('Ticket id').fill('OPS-77');
    await asked;
    await page.locator(`tr[data-run="${other}"]`).waitFor({ state: 'detached' });
    expect(
      await page.locator('tr[data-run]').evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-run'))),
    ).toEqual([mine]);
  });

  it('has no serious or critical accessibility issue on the inventory and a fan-out workspace, at desktop and phone width', async () => {
    expect((await api('admin', 'PUT', '/inventory/nodes/db-2', { groups: [], attributes: { host: 'h' } })).status).toBe(
      201,
    );
    const runs = (await api('operator', 'GET', '/runs')).body.runs as Array<{ runId: string }>;
    for (const viewport of [
      { width: 1280, height: 800 },
      { width: 390, height: 844 },
    ]) {
      const page = await signedIn('admin', viewport);
      await page.goto(`${consoleUrl}#/inventory`);
      await page.locator('tr[data-node="db-2"]').waitFor();
      await page.getByText('Declare a node').click();
      expect(await seriousA11yViolations(page), `inventory at ${viewport.width}px`).toEqual([]);
      await page.goto(`${consoleUrl}#/runs/${runs[0]?.runId ?? ''}`);
      await page.locator('li[data-step="greet"] > button').click();
      await page.getByTestId('targets').waitFor();
      expect(await seriousA11yViolations(page), `fan-out workspace at ${viewport.width}px`).toEqual([]);
    }
  });
});
