import { describe, expect, it } from 'vitest';
import {
  admitThrough,
  BREAKER_DEFAULTS,
  closedBreaker,
  probeWithdrawn,
  recordOutcome,
} from '../../../../shared/domain/admission/breaker.js';
import { dependencyVerdict, findCycle } from '../../../../shared/domain/admission/dependencies.js';
import { weightedRoundRobin } from '../../../../shared/domain/admission/fairness.js';
import type { Limit } from '../../../../shared/domain/admission/limits.js';
import { type Controls, planAdmission } from '../../../../shared/domain/admission/plan.js';
import type { Quota } from '../../../../shared/domain/admission/quotas.js';

const now = new Date('2030-01-01T10:20:30.000Z');
const quota = (fields: Partial<Quota>): Quota => ({
  runbook: 'rb',
  tenantId: 't',
  updatedAt: now.toISOString(),
  updatedBy: 'admin',
  ...fields,
});
const controls = (fields: Partial<Controls> = {}): Controls => ({
  quotas: [],
  limits: [],
  breakers: new Map(),
  buckets: new Map(),
  ...fields,
});
const candidate = { runId: 'run-1', runbookId: 'rb', priority: 'normal' as const, source: 'api' };

describe('admission planning', () => {
  it('refuses with `backlog` while the profile queue is at its bound, naming the profile', () => {
    const backlog = { profile: 'dev-flex', depth: 10, max: 10 };
    expect(planAdmission({ ...candidate, backlog }, controls(), now)).toEqual({
      admit: false,
      limit: 'backlog',
      source: 'dev-flex',
      nextEligibleAt: '2030-01-01T10:20:35.000Z',
    });
    expect(planAdmission({ ...candidate, backlog: { ...backlog, depth: 9 } }, controls(), now).admit).toBe(true);
    expect(planAdmission({ ...candidate, priority: 'emergency', backlog }, controls(), now).admit).toBe(true);
  });

  it('takes nothing when no control applies', () => {
    expect(planAdmission(candidate, controls(), now)).toEqual({ admit: true, counters: [], buckets: [] });
  });

  it('takes the active counter of the runbook and of the tenant-wide quota', () => {
    const plan = planAdmission(
      candidate,
      controls({ quotas: [quota({ maxActive: 3 }), quota({ runbook: '*', maxActive: 10 })] }),
      now,
    );
    expect(plan.admit && plan.counters.map((c) => [c.name, c.max, c.held])).toEqual([
      ['active#rb', 3, true],
      ['active#*', 10, true],
    ]);
  });

  it('counts an emergency run against its own allowance, not the normal one', () => {
    const plan = planAdmission(
      { ...candidate, priority: 'emergency' },
      controls({ quotas: [quota({ maxActive: 1, emergency: { maxActive: 2 } })] }),
      now,
    );
    expect(plan.admit && plan.counters.map((c) => c.name)).toEqual(['emergency#rb']);
  });

  it('takes the hour window counter, expiring at the next hour', () => {
    const plan = planAdmission(candidate, controls({ quotas: [quota({ maxPerHour: 5 })] }), now);
    expect(plan.admit && plan.counters).toEqual([
      { name: 'hour#rb#2030-01-01T10:00:00.000Z', max: 5, expiresAt: '2030-01-01T11:00:00.000Z', held: false },
    ]);
  });

  it('refuses with `burst` when the bucket is empty, and says when a token comes back', () => {
    const buckets = new Map([['bucket#rb', { tokens: 0, at: now.toISOString() }]]);
    const plan = planAdmission(candidate, controls({ quotas: [quota({ burst: 4, maxPerHour: 3600 })], buckets }), now);
    expect(plan).toEqual({
      admit: false,
      limit: 'burst',
      source: 'rb',
      nextEligibleAt: new Date(now.getTime() + 1000).toISOString(),
    });
  });

  it('holds a paused source, and throttles a source by a minute window', () => {
    const pause: Limit = { kind: 'pause', tenantId: 't', source: 'rb', reason: 'r', by: 'op', at: now.toISOString() };
    expect(planAdmission(candidate, controls({ limits: [pause] }), now)).toMatchObject({
      admit: false,
      limit: 'paused',
    });
    const throttle: Limit = {
      kind: 'throttle',
      tenantId: 't',
      source: 'api',
      maxPerMinute: 6,
      until: '2030-01-01T11:00:00.000Z',
      reason: 'r',
      by: 'op',
      at: now.toISOString(),
    };
    const plan = planAdmission(candidate, controls({ limits: [throttle] }), now);
    expect(plan.admit && plan.counters.map((c) => [c.name, c.max])).toEqual([['rate#api#2030-01-01T10:20:00.000Z', 6]]);
  });
});

describe('circuit breakers', () => {
  it('opens at 6 failures in 10 runs, half-opens after the cooldown, and closes on a success', () => {
    let breaker = closedBreaker('rb', now);
    const changes = [];
    for (const ok of [true, false, true, false, true, false, true, false, false, false]) {
      const step = recordOutcome(breaker, ok, now);
      breaker = step.next;
      changes.push(step.change);
    }
    expect(changes.filter(Boolean)).toEqual(['opened']);
    expect(breaker.state).toBe('open');
    const later = new Date(now.getTime() + 61_000);
    const plan = planAdmission(candidate, controls({ breakers: new Map([['rb', breaker]]) }), later);
    expect(plan.admit && plan.probe?.next.state).toBe('half_open');
    expect(recordOutcome({ ...breaker, state: 'half_open' }, true, later).change).toBe('closed');
    expect(recordOutcome({ ...breaker, state: 'half_open' }, false, later).next.state).toBe('open');
  });

  it('changes nothing for a success on a closed breaker whose window holds only successes, and is full', () => {
    let breaker = closedBreaker('rb', now);
    for (let i = 0; i < BREAKER_DEFAULTS.window; i++) breaker = recordOutcome(breaker, true, now).next;
    expect(breaker.outcomes).toHaveLength(BREAKER_DEFAULTS.window);
    const later = new Date(now.getTime() + 5_000);
    // The same object: the caller stores nothing.
    expect(recordOutcome(breaker, true, later)).toEqual({ next: breaker, change: undefined });
    expect(recordOutcome(breaker, true, later).next).toBe(breaker);
    // A failure is recorded, and a success after it too, until the window is all successes again.
    const failed = recordOutcome(breaker, false, later).next;
    expect(failed.outcomes.at(-1)).toBe(false);
    const after = recordOutcome(failed, true, later).next;
    expect(after).not.toBe(failed);
    expect(after.outcomes.filter((ok) => !ok)).toHaveLength(1);
    // Not full yet: a success is recorded.
    const young = recordOutcome(closedBreaker('rb', now), true, later).next;
    expect(recordOutcome(young, true, later).next.outcomes).toHaveLength(2);
  });

  it('ignores runs that end while it is open, and runs other than the probe while half-open', () => {
    let breaker = closedBreaker('rb', now);
    for (let i = 0; i < 10; i++) breaker = recordOutcome(breaker, false, now).next;
    expect(breaker.state).toBe('open');
    expect(recordOutcome(breaker, true, now, BREAKER_DEFAULTS, 'run-old')).toEqual({
      next: breaker,
      change: undefined,
    });
    const later = new Date(now.getTime() + 61_000);
    const half = admitThrough(breaker, 'run-probe', later);
    expect(half?.state).toBe('half_open');
    if (!half) return;
    expect(recordOutcome(half, true, later, BREAKER_DEFAULTS, 'run-old').change).toBeUndefined();
    const failed = recordOutcome(half, false, later, BREAKER_DEFAULTS, 'run-probe');
    expect(failed.change).toBe('opened');
    expect(failed.next.probeRunId).toBeUndefined();
    expect(recordOutcome(half, true, later, BREAKER_DEFAULTS, 'run-probe').next.state).toBe('closed');
  });

  it('lets the next run probe when the probe is cancelled', () => {
    const later = new Date(now.getTime() + 61_000);
    const half = admitThrough(
      { ...closedBreaker('rb', now), state: 'open', openUntil: now.toISOString() },
      'run-p',
      later,
    );
    if (!half) throw new Error('expected a half-open breaker');
    expect(probeWithdrawn(half, 'run-other', later)).toBeUndefined();
    const open = probeWithdrawn(half, 'run-p', later);
    expect(open).toMatchObject({ state: 'open', openUntil: later.toISOString() });
    if (!open) return;
    expect(admitThrough(open, 'run-next', later)?.probeRunId).toBe('run-next');
  });

  it('keeps a breaker open for the configured cooldown', () => {
    let breaker = closedBreaker('rb', now);
    const settings = { ...BREAKER_DEFAULTS, cooldownMs: 2_000 };
    for (let i = 0; i < 10; i++) breaker = recordOutcome(breaker, false, now, settings).next;
    expect(breaker.openUntil).toBe(new Date(now.getTime() + 2_000).toISOString());
  });

  it('stays closed under 10 runs whatever their outcome', () => {
    let breaker = closedBreaker('rb', now);
    for (let i = 0; i < 9; i++) breaker = recordOutcome(breaker, false, now).next;
    expect(breaker.state).toBe('closed');
  });
});

describe('fairness and dependencies', () => {
  it('interleaves tenants round-robin by weight', () => {
    const order = weightedRoundRobin(
      new Map([
        ['a', ['a1', 'a2', 'a3', 'a4']],
        ['b', ['b1', 'b2']],
      ]),
      (t) => (t === 'a' ? 2 : 1),
    );
    expect(order).toEqual(['a1', 'a2', 'b1', 'a3', 'a4', 'b2']);
  });

  it('starts each round after the tenant served last, wrapping around', () => {
    const backlogs = new Map([
      ['a', ['a1', 'a2']],
      ['b', ['b1']],
      ['c', ['c1']],
    ]);
    expect(weightedRoundRobin(backlogs, undefined, 'a')).toEqual(['b1', 'c1', 'a1', 'a2']);
    expect(weightedRoundRobin(backlogs, undefined, 'c')).toEqual(['a1', 'b1', 'c1', 'a2']);
    expect(weightedRoundRobin(backlogs, undefined, 'bb')).toEqual(['c1', 'a1', 'b1', 'a2']);
  });

  it('waits, goes, or fails on the first dependency that did not succeed', () => {
    expect(dependencyVerdict(new Map([['x', 'running']]))).toEqual({ kind: 'wait', waitingOn: ['x'] });
    expect(dependencyVerdict(new Map([['x', 'succeeded']]))).toEqual({ kind: 'ready' });
    expect(
      dependencyVerdict(
        new Map([
          ['x', 'succeeded'],
          ['y', 'failed'],
        ]),
      ),
    ).toEqual({
      kind: 'fail',
      failed: 'y',
      status: 'failed',
    });
  });

  it('finds a cycle and none in a chain', () => {
    expect(
      findCycle(
        new Map([
          ['a', ['b']],
          ['b', ['c']],
          ['c', []],
        ]),
      ),
    ).toBeUndefined();
    expect(
      findCycle(
        new Map([
          ['a', ['b']],
          ['b', ['a']],
        ]),
      ),
    ).toEqual(['a', 'b', 'a']);
  });
});
