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

/**
 * Backpressure (seed 002 WO-012): admission reads the run's profile queue and holds new runs back
 * while it is past its bound. A queue's depth lags what was just admitted, so within one pass each
 * admitted run counts as a message already; a pass that admits a whole backlog at once cannot
 * overshoot the bound by more than the runs that were admitted concurrently elsewhere.
 */
export function makeBackpressure(deps: BackpressureDeps) {
  const profiles = new Map<string, Promise<SandboxProfileName | undefined>>();

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
      const depths = new Map<SandboxProfileName, Promise<number>>();
      const added = new Map<string, number>();
      const backlogOf = async (run: Run): Promise<QueueBacklog | undefined> => {
        const profile = await profileOf(run);
        if (!profile) return undefined;
        let depth = depths.get(profile);
        if (!depth) {
          depth = deps.depth.depth(profile).then((reading) => reading.visible);
          depths.set(profile, depth);
          depth.catch(() => depths.delete(profile));
        }
        return { profile, depth: (await depth) + (added.get(profile) ?? 0), max: deps.maxBacklog(profile) };
      };
      return {
        backlogOf,
        admitted(profile) {
          added.set(profile, (added.get(profile) ?? 0) + 1);
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
