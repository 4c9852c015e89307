import type { Run } from '../domain/entities.js';
import type { QueueBacklog } from '../domain/admission/plan.js';
import { type SandboxProfileName, sandboxProfileNameSchema } from '../domain/sandbox-profiles.js';
import type { QueueDepth } from './ports/capacity.js';
import type { RunbookStore } from './ports.js';

export interface BackpressureDeps {
  readonly depth: QueueDepth;
  /** Runbook versions (immutable, so a caching store serves them): a run's profile is its runbook's. */
  readonly runbooks: Pick<RunbookStore, 'get'>;
  /** The visible backlog at which a profile's new runs wait. */
  readonly maxBacklog: (profile: SandboxProfileName) => number;
}

/** One admission pass's view of the profile queues. */
export interface BackpressurePass {
  /** The backlog a run would join: the depth read once per pass, plus the runs this pass admitted onto it. */
  backlogOf(run: Run): Promise<QueueBacklog | undefined>;
  /** A run was admitted onto `profile`: it counts as one more waiting message for the rest of the pass. */
  admitted(profile: string): void;
  /** Whether this pass already found the run's profile full, so the run need not be tried. */
  saturated(run: Run): Promise<boolean>;
}

/** A read of a profile queue's depth, and the runs admitted onto the queue since it was taken. */
interface DepthReading {
  readonly visible: Promise<number>;
  added: number;
}

/**
 * Backpressure (seed 002 WO-012): admission reads the run's profile queue and holds new runs back
 * while it is past its bound. A queue's depth lags what was just admitted, so each run admitted on
 * a reading counts as a message already; a pass that admits a whole backlog at once cannot
 * overshoot the bound by more than the runs that were admitted concurrently elsewhere.
 *
 * Passes that need a profile's depth while a read of it is under way join that read instead of
 * making their own (a burst of creations reads the queue once, not once per run), and count their
 * admissions on it together; a pass that starts once the read has answered reads the queue again.
 */
export function makeBackpressure(deps: BackpressureDeps) {
  const profiles = new Map<string, Promise<SandboxProfileName | undefined>>();
  /** Reads under way, per profile: joined by every pass that needs the profile meanwhile. */
  const reading = new Map<SandboxProfileName, DepthReading>();

  /** The read under way for `profile`, or a new one, forgotten once it answers. */
  function readingOf(profile: SandboxProfileName): DepthReading {
    const current = reading.get(profile);
    if (current) return current;
    const visible = deps.depth.depth(profile).then((depth) => depth.visible);
    const started: DepthReading = { visible, added: 0 };
    reading.set(profile, started);
    const forget = () => {
      if (reading.get(profile) === started) reading.delete(profile);
    };
    visible.then(forget, forget);
    return started;
  }

  /** The profile a run's steps go to; undefined for a runbook without a known one (nothing to watch). */
  function profileOf(run: Run): Promise<SandboxProfileName | undefined> {
    const key = `${run.tenantId}|${run.runbookId}|${run.runbookVersion}`;
    let profile = profiles.get(key);
    if (!profile) {
      profile = deps.runbooks.get(run.tenantId, run.runbookId, run.runbookVersion).then((version) => {
        const parsed = sandboxProfileNameSchema.safeParse(version?.definition.sandbox_profile);
        return parsed.success ? parsed.data : undefined;
      });
      profiles.set(key, profile);
      profile.catch(() => profiles.delete(key));
    }
    return profile;
  }

  return {
    pass(): BackpressurePass {
      const depths = new Map<string, DepthReading>();
      const backlogOf = async (run: Run): Promise<QueueBacklog | undefined> => {
        const profile = await profileOf(run);
        if (!profile) return undefined;
        let depth = depths.get(profile);
        if (!depth) {
          const joined = readingOf(profile);
          depths.set(profile, joined);
          joined.visible.catch(() => depths.delete(profile));
          depth = joined;
        }
        return { profile, depth: (await depth.visible) + depth.added, max: deps.maxBacklog(profile) };
      };
      return {
        backlogOf,
        admitted(profile) {
          const depth = depths.get(profile);
          if (depth) depth.added++;
        },
        async saturated(run) {
          const profile = await profileOf(run);
          if (!profile || !depths.has(profile) || run.priority === 'emergency') return false;
          const backlog = await backlogOf(run);
          return backlog !== undefined && backlog.depth >= backlog.max;
        },
      };
    },
  };
}
export type Backpressure = ReturnType<typeof makeBackpressure>;
