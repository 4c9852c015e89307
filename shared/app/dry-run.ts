import { z } from 'zod';
import type { InventoryReader } from './ports/inventory.js';
import type { RunbookStore } from './ports.js';
import type { Principal } from '../domain/entities.js';
import { MAX_TARGETS, rateLimitsOf, unitOf, wavesOf } from '../domain/fanout.js';
import { describeTarget, resolveTarget } from '../domain/inventory.js';
import { decideUnit, type PolicyDocument } from '../domain/policy.js';
import { allSteps, parseRunbookObject, resolveInputs } from '../domain/runbook.js';
import { profileAllows, SANDBOX_PROFILES } from '../domain/sandbox-profiles.js';
import type { CreateRunBody } from './runs.js';
import { versionOf } from './runbook-versions.js';

/** One step of a dry run's plan: where it would run, what the policy says, its gate and waves. */
export const dryRunStepSchema = z.looseObject({
  id: z.string(),
  phase: z.string(),
  mode: z.enum(['barrier', 'pipeline']),
  backend: z.string(),
  action: z.string(),
  condition: z.string(),
  /** `all nodes`, `group web`, `node db-1`; absent for a step that runs once anywhere. */
  target: z.string().optional(),
  targets: z.array(z.string()),
  policy: z.looseObject({ outcome: z.enum(['allow', 'deny', 'needs_approval']), rule: z.string(), reason: z.string() }),
  gate: z
    .looseObject({
      scope: z.string(),
      scopeId: z.string(),
      requiredApprovals: z.number().int(),
      blastRadius: z.string(),
      autoApproved: z.boolean(),
    })
    .optional(),
  maxConcurrency: z.number().int().optional(),
  maxErrors: z.number().int().optional(),
  ramp: z.string().optional(),
  /** How many targets would start together, wave after wave, if every target took as long. */
  waves: z.array(z.number().int()),
  /** What would stop this step before any target starts. */
  problem: z.string().optional(),
});

export const dryRunPlanSchema = z.looseObject({
  dryRun: z.literal(true),
  runbook: z.looseObject({ id: z.string(), version: z.number().int(), digest: z.string() }),
  inputs: z.record(z.string(), z.json()),
  steps: z.array(dryRunStepSchema),
});
export type DryRunPlan = z.infer<typeof dryRunPlanSchema>;

export interface DryRunDeps {
  readonly runbooks: RunbookStore;
  readonly inventory: InventoryReader;
  /** The deployment's policy, or the error it failed to load with (every step is then denied). */
  readonly policy: PolicyDocument | Error;
}

/**
 * A run's plan without the run (seed 000's pre-flight): for each step the nodes its target
 * resolves to now, the policy's decision and its reason, the gate and how many approvers it
 * needs, and the waves rate control would start. Nothing is stored and no event is written.
 */
export function makeDryRun(deps: DryRunDeps) {
  return async function dryRun(principal: Principal, body: CreateRunBody): Promise<DryRunPlan> {
    const version = await versionOf(deps.runbooks, principal.tenantId, body);
    const runbook = parseRunbookObject(version.definition);
    const inputs = resolveInputs(runbook, body.inputs);
    const nodes = await deps.inventory.list(principal.tenantId);
    const profile = SANDBOX_PROFILES[runbook.sandbox_profile];
    const steps = allSteps(runbook).map(({ step, phase }) => {
      const unit = unitOf(runbook, step.id);
      const pipeline = unit?.pipeline === true;
      const selector = unit?.phase.steps[0]?.target ?? step.target;
      const targets = selector ? resolveTarget(selector, nodes).map((n) => n.id) : [];
      const limited = pipeline && unit ? unit.phase : step;
      const limits = selector ? rateLimitsOf(limited, runbook.strategy, targets.length) : undefined;
      const verdict = decideUnit(deps.policy, runbook, pipeline ? (phase.steps[0]?.id ?? step.id) : step.id);
      const gate =
        verdict.outcome === 'needs_approval'
          ? { ...verdict.gate, autoApproved: false }
          : verdict.outcome === 'allow' && verdict.autoApproved
            ? { ...verdict.autoApproved.gate, autoApproved: true }
            : undefined;
      const problem = !profileAllows(profile, step.backend, step.action)
        ? `${step.backend}.${step.action} is not allowed by sandbox profile ${profile.name}`
        : selector && targets.length === 0 && step.if_no_targets === 'fail'
          ? `${describeTarget(selector)} resolves to no node in the inventory`
          : targets.length > MAX_TARGETS
            ? `${targets.length} nodes; a step may act on at most ${MAX_TARGETS}`
            : undefined;
      return {
        id: step.id,
        phase: phase.id,
        mode: phase.mode,
        backend: step.backend,
        action: step.action,
        condition: step.condition,
        ...(selector && { target: describeTarget(selector) }),
        targets,
        policy: { outcome: verdict.outcome, rule: verdict.rule, reason: verdict.reason },
        ...(gate && { gate }),
        ...(limits && {
          maxConcurrency: limits.maxConcurrency,
          maxErrors: limits.haltAfter,
          ramp: limits.ramp ? 'exponential' : 'none',
        }),
        waves: limits ? wavesOf(limits, targets.length) : [1],
        ...(problem && { problem }),
      };
    });
    return {
      dryRun: true,
      runbook: { id: version.runbookId, version: version.version, digest: version.digest },
      inputs,
      steps,
    };
  };
}
