import { describe, expect, it } from 'vitest';
import { breakerCell, makeControlLog } from '../../../shared/app/admission-controls.js';
import { type BreakerChanged, makeBreakers } from '../../../shared/app/breakers.js';
import { makeInMemoryAdmissionStore } from '../../../shared/app/ports/in-memory/admission.js';
import { makeFakeClock } from '../../../shared/app/ports/in-memory/fakes.js';
import { admitThrough, BREAKER_DEFAULTS, breakerStateSchema } from '../../../shared/domain/admission/breaker.js';

function setUp() {
  const admission = makeInMemoryAdmissionStore(new Map());
  const clock = makeFakeClock();
  const changes: BreakerChanged[] = [];
  const breakers = makeBreakers({
    admission,
    clock,
    settings: { ...BREAKER_DEFAULTS, cooldownMs: 5_000 },
    changed: (change) => void changes.push(change),
  });
  const stored = async () => {
    const [cell] = await admission.cells('t', breakerCell('rb'));
    return cell ? breakerStateSchema.parse(cell.value) : undefined;
  };
  return { admission, clock, changes, breakers, stored };
}

describe('breakers counting ended runs', () => {
  it('opens on the run that makes 6 failures of 10, names it, and logs the change', async () => {
    const { admission, changes, breakers, stored } = setUp();
    const outcomes = [true, false, true, false, false, true, false, true, false, false];
    for (const [i, ok] of outcomes.entries()) await breakers.countOutcome('rb', 't', ok, `run-${i}`);
    expect(changes).toEqual([{ tenantId: 't', runbookId: 'rb', state: 'open', runId: 'run-9' }]);
    expect((await stored())?.state).toBe('open');
    const log = await makeControlLog(admission).entries('t');
    expect(log.map((e) => [e.type, e.runId])).toEqual([['breaker.opened', 'run-9']]);
  });

  it('leaves an open breaker as it is when a run admitted before the opening ends', async () => {
    const { changes, breakers, stored } = setUp();
    for (let i = 0; i < 10; i++) await breakers.countOutcome('rb', 't', false, `run-${i}`);
    const open = await stored();
    await breakers.countOutcome('rb', 't', true, 'run-late');
    expect(await stored()).toEqual(open);
    expect(changes).toHaveLength(1);
  });

  it('closes on the probe’s success after the cooldown, and lets another run probe when the probe is cancelled', async () => {
    const { admission, clock, changes, breakers, stored } = setUp();
    for (let i = 0; i < 10; i++) await breakers.countOutcome('rb', 't', false, `run-${i}`);
    clock.advance(5_000);
    const open = await stored();
    const half = open && admitThrough(open, 'run-probe', clock.now());
    if (!half) throw new Error('expected the breaker to let a probe through');
    await admission.commit([{ kind: 'putCell', tenantId: 't', name: breakerCell('rb'), value: { ...half } }]);
    await breakers.withdrawProbe('rb', 't', 'run-probe');
    expect(await stored()).toMatchObject({ state: 'open', openUntil: clock.now().toISOString() });
    const again = admitThrough((await stored()) ?? half, 'run-next', clock.now());
    if (!again) throw new Error('expected a second probe');
    await admission.commit([{ kind: 'putCell', tenantId: 't', name: breakerCell('rb'), value: { ...again } }]);
    await breakers.countOutcome('rb', 't', true, 'run-next');
    expect((await stored())?.state).toBe('closed');
    expect(changes.map((c) => [c.state, c.runId])).toEqual([
      ['open', 'run-9'],
      ['closed', 'run-next'],
    ]);
  });
});
