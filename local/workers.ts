import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { SANDBOX_PROFILE_NAMES, type SandboxProfileName } from '../shared/domain/sandbox-profiles.js';

export interface WorkerPoolOptions {
  /** The worker entrypoint, run with Node and tsx, the way the image runs its bundle. */
  readonly entrypoint: string;
  readonly counts: Readonly<Partial<Record<SandboxProfileName, number>>>;
  /** Agent node workers, one process each, besides the profile counts. */
  readonly agents?: readonly AgentWorkerSpec[];
  /** The environment every worker gets (endpoints, table names); the profile is added per worker. */
  readonly env: Readonly<Record<string, string>>;
  /** How long a stopping worker may take to drain before it is killed (the task definition's stop timeout). */
  readonly stopTimeoutMs?: number;
  readonly log: (line: string) => void;
  /**
   * A worker exited without draining (killed, crashed): what ECS reports as a stopped task, so
   * its step is recovered at once instead of when its lease lapses.
   */
  readonly onDeath?: (dead: { readonly pid: number; readonly how: string }) => void;
}

/** A worker the pool asked to stop (scale-in) and how long it took to drain and exit. */
export interface Drained {
  readonly profile: SandboxProfileName;
  readonly pid: number;
  readonly ms: number;
}

/** An agent node worker: `CAPSTAN_NODE_ID` and its groups (its tenant is `CAPSTAN_NODE_TENANT`, or the platform's). */
export interface AgentWorkerSpec {
  readonly nodeId: string;
  readonly groups: readonly string[];
  readonly profile: SandboxProfileName;
  /** What the node says of itself, for `{{ target.attributes.<key> }}`. */
  readonly attributes?: Readonly<Record<string, string>>;
}

interface Slot {
  readonly profile: SandboxProfileName;
  readonly index: number;
  readonly agent?: AgentWorkerSpec;
  /** Stopped on purpose: not started again when it exits. */
  stopped?: boolean;
  child?: ChildProcess;
  restarts: number;
  startedAt: number;
  timer?: NodeJS.Timeout;
  /** Asked to stop by a scale-in: not restarted when it exits. */
  retiring?: { readonly at: number; readonly kill: NodeJS.Timeout };
}

/** Counts per profile from `dev-flex=2,prod-standard=1`; unnamed profiles get `fallback`. */
export function parseWorkerCounts(
  text: string | undefined,
  fallback: number,
): Partial<Record<SandboxProfileName, number>> {
  const counts: Partial<Record<SandboxProfileName, number>> = Object.fromEntries(
    SANDBOX_PROFILE_NAMES.map((p) => [p, fallback]),
  );
  for (const part of (text ?? '').split(',').filter((p) => p.trim() !== '' && !isAgentPart(p))) {
    const [name, value] = part.split('=').map((s) => s.trim());
    const count = Number(value);
    if (!SANDBOX_PROFILE_NAMES.includes(name as SandboxProfileName) || !Number.isInteger(count) || count < 0)
      throw new Error(
        `CAPSTAN_WORKERS: '${part}' is not <profile>=<count> with a profile among ${SANDBOX_PROFILE_NAMES.join(', ')}`,
      );
    counts[name as SandboxProfileName] = count;
  }
  return counts;
}

const isAgentPart = (part: string) => part.trim().startsWith('agent:');

/**
 * The agent node workers of `CAPSTAN_WORKERS`: each `agent:<node>[:<group>+<group>...][@<profile>]`
 * entry is one worker for node `<node>` in those groups (profile `dev-flex` unless named), e.g.
 * `dev-flex=1,agent:web-1:web,agent:web-2:web+eu`. A node id here cannot hold `:` or `@`.
 */
export function parseAgentWorkers(text: string | undefined): AgentWorkerSpec[] {
  const agents: AgentWorkerSpec[] = [];
  for (const part of (text ?? '').split(',').filter(isAgentPart)) {
    const match = /^agent:([A-Za-z0-9][A-Za-z0-9._-]{0,127})(?::([A-Za-z0-9._+-]*))?(?:@([a-z0-9-]+))?$/.exec(
      part.trim(),
    );
    const profile = (match?.[3] ?? 'dev-flex') as SandboxProfileName;
    if (!match?.[1] || !SANDBOX_PROFILE_NAMES.includes(profile))
      throw new Error(
        `CAPSTAN_WORKERS: '${part}' is not agent:<node>[:<group>+<group>...][@<profile>] with a profile among ${SANDBOX_PROFILE_NAMES.join(', ')}`,
      );
    if (agents.some((a) => a.nodeId === match[1]))
      throw new Error(`CAPSTAN_WORKERS: agent '${match[1]}' is named twice`);
    agents.push({ nodeId: match[1], groups: (match[2] ?? '').split('+').filter(Boolean), profile });
  }
  return agents;
}

/**
 * Worker processes per sandbox profile, kept at their count the way an ECS service keeps its
 * tasks: a worker that exits is started again after a back-off (1 s doubling to 30 s, reset
 * after a minute of health), and each restart is logged.
 */
export class WorkerPool {
  private slots: Slot[] = [];
  private stopping = false;
  /** Workers a scale-in stopped, with their drain times, oldest first. */
  readonly drained: Drained[] = [];

  constructor(private readonly options: WorkerPoolOptions) {
    for (const [profile, count] of Object.entries(options.counts) as Array<[SandboxProfileName, number]>)
      for (let index = 1; index <= count; index++) this.slots.push({ profile, index, restarts: 0, startedAt: 0 });
    for (const [i, agent] of (options.agents ?? []).entries())
      this.slots.push({ profile: agent.profile, index: i + 1, agent, restarts: 0, startedAt: 0 });
  }

  /** Workers running now, by profile. */
  get running(): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const slot of this.slots)
      if (slot.child?.exitCode === null) counts[slot.profile] = (counts[slot.profile] ?? 0) + 1;
    return counts;
  }

  get pids(): number[] {
    return this.slots.flatMap((s) => (s.child?.pid !== undefined && s.child.exitCode === null ? [s.child.pid] : []));
  }

  start(): void {
    for (const slot of this.slots) this.launch(slot);
  }

  /** Workers of `profile` the pool keeps (running or restarting), not counting those draining away. */
  size(profile: SandboxProfileName): number {
    return this.slots.filter((s) => s.profile === profile && !s.retiring).length;
  }

  /** Workers of `profile` a scale-in stopped that are still finishing their steps. */
  draining(profile: SandboxProfileName): number {
    return this.slots.filter((s) => s.profile === profile && s.retiring).length;
  }

  /**
   * Moves `profile` to `count` workers, as an ECS service moves to a new desired count: new
   * workers start at once; surplus ones (the newest first) get one SIGTERM and drain, finishing
   * the step they run, and are killed only past the stop timeout.
   */
  scale(profile: SandboxProfileName, count: number): void {
    if (this.stopping) return;
    const kept = this.slots.filter((s) => s.profile === profile && !s.retiring);
    for (let n = kept.length; n < count; n++) {
      const index = Math.max(0, ...this.slots.filter((s) => s.profile === profile).map((s) => s.index)) + 1;
      const slot: Slot = { profile, index, restarts: 0, startedAt: 0 };
      this.slots.push(slot);
      this.launch(slot);
    }
    for (const slot of kept.slice(count).reverse()) this.retire(slot);
  }

  private retire(slot: Slot): void {
    const child = slot.child;
    clearTimeout(slot.timer);
    if (!child || child.exitCode !== null || child.signalCode !== null) {
      this.slots = this.slots.filter((s) => s !== slot);
      return;
    }
    const kill = setTimeout(() => child.kill('SIGKILL'), this.options.stopTimeoutMs ?? 10_000);
    slot.retiring = { at: Date.now(), kill };
    this.options.log(`${this.label(slot)} scaled in; draining`);
    child.kill('SIGTERM');
  }

  private label(slot: Slot): string {
    return slot.agent ? `agent ${slot.agent.nodeId}` : `worker ${slot.profile}#${slot.index}`;
  }

  /** Drains one agent node's worker (SIGTERM) and does not start it again; resolves when it exited. */
  async stopAgent(nodeId: string): Promise<void> {
    const slot = this.slots.find((s) => s.agent?.nodeId === nodeId);
    if (!slot) throw new Error(`no agent worker for node '${nodeId}'`);
    slot.stopped = true;
    clearTimeout(slot.timer);
    const child = slot.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      child.once('exit', () => resolve());
      child.kill('SIGTERM');
    });
  }

  private launch(slot: Slot): void {
    const child = spawn(process.execPath, ['--import', 'tsx', this.options.entrypoint], {
      env: {
        ...this.options.env,
        CAPSTAN_SANDBOX_PROFILE: slot.profile,
        CAPSTAN_WORKER_NAME: slot.agent ? `agent-${slot.agent.nodeId}` : `${slot.profile}-${slot.index}`,
        ...(slot.agent && {
          CAPSTAN_NODE_ID: slot.agent.nodeId,
          CAPSTAN_WORKER_GROUPS: slot.agent.groups.join(','),
          ...(slot.agent.attributes && { CAPSTAN_NODE_ATTRIBUTES: JSON.stringify(slot.agent.attributes) }),
        }),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      // Its own process group, as a task is its own container: Ctrl-C in the terminal reaches the
      // stack only, and the worker gets one SIGTERM from `stop` (drain), never SIGINT as well.
      detached: true,
    });
    slot.child = child;
    slot.startedAt = Date.now();
    const tag = slot.agent ? `agent:${slot.agent.nodeId}` : `${slot.profile}#${slot.index}`;
    for (const stream of [child.stdout, child.stderr])
      createInterface({ input: stream }).on('line', (line) => this.options.log(`[${tag}] ${line}`));
    child.once('exit', (code, signal) => {
      if (slot.retiring) {
        clearTimeout(slot.retiring.kill);
        this.slots = this.slots.filter((s) => s !== slot);
        const ms = Date.now() - slot.retiring.at;
        if (child.pid !== undefined) this.drained.push({ profile: slot.profile, pid: child.pid, ms });
        if ((signal !== null || code !== 0) && child.pid !== undefined && !this.stopping)
          this.options.onDeath?.({ pid: child.pid, how: `exited with ${signal ?? `code ${code}`} while draining` });
        this.options.log(`${this.label(slot)} drained in ${ms} ms (${signal ?? `code ${code}`})`);
        return;
      }
      if (this.stopping || slot.stopped) return;
      // Exit 0 is a drain (asked by an operator): the worker deregistered and holds nothing.
      if ((signal !== null || code !== 0) && child.pid !== undefined)
        this.options.onDeath?.({ pid: child.pid, how: `exited with ${signal ?? `code ${code}`}` });
      if (Date.now() - slot.startedAt > 60_000) slot.restarts = 0;
      const delay = Math.min(1000 * 2 ** slot.restarts, 30_000);
      slot.restarts++;
      this.options.log(
        `${this.label(slot)} exited (${signal ?? `code ${code}`}); restarting in ${delay / 1000} s (restart ${slot.restarts})`,
      );
      slot.timer = setTimeout(() => this.launch(slot), delay);
    });
  }

  /** SIGTERM to every worker (they drain), SIGKILL to any still running after the stop timeout. */
  async stop(): Promise<void> {
    this.stopping = true;
    const running = this.slots.flatMap((slot) => {
      clearTimeout(slot.timer);
      const child = slot.child;
      return child && child.exitCode === null && child.signalCode === null
        ? [{ child, draining: !!slot.retiring }]
        : [];
    });
    await Promise.all(
      running.map(
        ({ child, draining }) =>
          new Promise<void>((resolve) => {
            const kill = setTimeout(() => child.kill('SIGKILL'), this.options.stopTimeoutMs ?? 10_000);
            child.once('exit', () => {
              clearTimeout(kill);
              resolve();
            });
            // A draining worker has had its SIGTERM; a second one would make it give up its step.
            if (!draining) child.kill('SIGTERM');
          }),
      ),
    );
  }

  /** Kills every worker at once; for the exit hook, when there is no time to drain. */
  killAll(): void {
    this.stopping = true;
    for (const slot of this.slots) {
      clearTimeout(slot.timer);
      if (slot.child?.exitCode === null) slot.child.kill('SIGKILL');
    }
  }
}
