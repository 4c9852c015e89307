import { randomUUID } from 'node:crypto';
import type { Run } from '../domain/entities.js';
import { StaleWriteError } from '../domain/errors.js';
import { runStateMachine } from '../domain/statuses.js';
import { type AdmissionStore, waiterCell } from './ports/admission.js';
import type { RunStore } from './ports/runs.js';
import type { Clock } from './ports.js';

/**
 * The end of a ticket's line: from the active run `from`, follow the run queued behind it, and
 * the one behind that, to the last. Runs that ended are out of the line.
 */
export function lastInLine(ticketRuns: readonly Run[], from: string): string {
  const waiting = ticketRuns.filter((r) => r.queuedBehind !== undefined && !runStateMachine.isTerminal(r.status));
  let last = from;
  for (let hops = 0; hops < ticketRuns.length; hops++) {
    const next = waiting.find((r) => r.queuedBehind === last);
    if (!next) break;
    last = next.runId;
  }
  return last;
}

export interface TicketQueueDeps {
  readonly runs: RunStore;
  readonly admission: AdmissionStore;
  readonly clock: Clock;
}

/**
 * Runs queued behind their ticket's active run (issue 18, a routing rule's `onActive: queue`).
 * A queued run waits, like a dependency, for the run ahead to end whatever its outcome; then it
 * takes the ticket's active slot with a conditional write in the same transaction that clears its
 * place in the queue, so a ticket never has two active runs.
 */
export function makeTicketQueue(deps: TicketQueueDeps) {
  /** Notes that `run` waits for `ahead` to end; the admitter looks at its waiters when it does. */
  async function waitBehind(run: Pick<Run, 'tenantId' | 'runId'>, ahead: string): Promise<void> {
    await deps.admission.commit([
      { kind: 'putCell', tenantId: run.tenantId, name: waiterCell(ahead, run.runId), value: { runId: run.runId } },
    ]);
  }

  /**
   * Where `run` joins its ticket's line: behind the last run queued behind the ticket's holder
   * (a run of the ticket that has not ended and is not queued). Undefined when none holds it.
   */
  async function placeInLine(run: Run): Promise<string | undefined> {
    if (!run.ticket) return undefined;
    const others = (await deps.runs.listByTicket(run.tenantId, run.ticket.id, { limit: 50 })).items.filter(
      (r) => r.runId !== run.runId,
    );
    const holder = others.find((r) => r.queuedBehind === undefined && !runStateMachine.isTerminal(r.status));
    return holder && lastInLine(others, holder.runId);
  }

  /**
   * A queued run whose run ahead may have ended: `ready` once it holds the ticket (or never
   * waited), `waiting` while the run ahead, or another that took the ticket first, is active.
   */
  async function takeTicket(queued: Run): Promise<'ready' | 'waiting'> {
    let run: Run | undefined = queued;
    // Each turn claims the ticket, or finds the run that holds it and waits behind that one; a
    // line holds at most 50 runs, so the turns are bounded.
    for (let turn = 0; turn <= 50 && run; turn++) {
      const ahead = run.queuedBehind;
      if (ahead === undefined || !run.ticket || run.status !== 'queued') return 'ready';
      const status = (await deps.runs.load(ahead))?.run.status;
      if (status !== undefined && !runStateMachine.isTerminal(status)) return 'waiting';
      const claimed = await claim(run, ahead, run.ticket.id);
      if (claimed === 'claimed') return 'ready';
      if (claimed === 'moved') {
        // Another look at this run moved it first: go on from where it is now.
        run = (await deps.runs.load(run.runId))?.run;
        continue;
      }
      // Another run took the ticket first (an API call, or a run queued alongside): wait behind it.
      const holder = await placeInLine(run);
      // The list may not show yet that the run ahead ended: the next look settles it.
      if (holder === undefined || holder === ahead) return 'waiting';
      await waitBehind(run, holder);
      const now = deps.clock.now().toISOString();
      const moved = await deps.runs.mutate(run.runId, (current) =>
        current.run.queuedBehind !== ahead || current.run.status !== 'queued'
          ? undefined
          : { run: { queuedBehind: holder, updatedAt: now }, events: [] },
      );
      // The new run ahead may have ended before this run's waiter was noted: look again.
      run = moved ? moved.record.run : (await deps.runs.load(run.runId))?.run;
    }
    return 'waiting';
  }

  /**
   * Takes the ticket's active slot for `run`, which waited behind `ahead`: `taken` when another
   * run holds it, `moved` when the run is no longer queued behind `ahead`.
   */
  async function claim(run: Run, ahead: string, ticketId: string): Promise<'claimed' | 'taken' | 'moved'> {
    const now = deps.clock.now().toISOString();
    try {
      const committed = await deps.runs.mutate(run.runId, (current) =>
        current.run.queuedBehind !== ahead || current.run.status !== 'queued'
          ? undefined
          : {
              run: { queuedBehind: undefined, updatedAt: now },
              events: [
                {
                  eventId: randomUUID(),
                  type: 'run.ticket_claimed',
                  timestamp: now,
                  payload: { ticketId, after: ahead },
                  meta: {},
                },
              ],
              writes: [
                { kind: 'claimTicket', tenantId: run.tenantId, ticketId, runId: run.runId, since: now },
                { kind: 'deleteCell', tenantId: run.tenantId, name: waiterCell(ahead, run.runId), mustExist: false },
              ],
            },
      );
      return committed ? 'claimed' : 'moved';
    } catch (error) {
      if (!(error instanceof StaleWriteError)) throw error;
      return 'taken';
    }
  }

  return { waitBehind, placeInLine, takeTicket };
}
export type TicketQueue = ReturnType<typeof makeTicketQueue>;
