import { z } from 'zod';
import { findAction } from './catalogue.js';
import { allSteps, BLAST_RADII, type BlastRadius, blastRadiusSchema, type Runbook, type Step } from './runbook.js';
import { environmentSchema, profileAllows, SANDBOX_PROFILES } from './sandbox-profiles.js';

/**
 * The policy engine (seed 000 section 4, seed 001 section 5): for a step about to be dispatched it
 * decides `allow`, `deny` or `needs_approval`, with the rule that decided and a reason a person can
 * read. The rules are data: a policy document per deployment, with the defaults below.
 */

/** A rule that matches steps by environment, backend and action (each optional: absent matches all). */
const matcherSchema = z.strictObject({
  id: z.string().regex(/^[a-z0-9][a-z0-9-]*$/, 'lowercase letters, digits and dashes'),
  environments: z.array(environmentSchema).min(1).optional(),
  backend: z.string().min(1).optional(),
  action: z.string().min(1).optional(),
  reason: z.string().min(1),
});
export type PolicyMatcher = z.infer<typeof matcherSchema>;

export const policyDocumentSchema = z.strictObject({
  version: z.literal(1),
  /** Seed 000 section 4.2: when a gate may be approved by policy instead of a person. */
  autoApproval: z
    .strictObject({
      environments: z.array(environmentSchema).default(['dev', 'staging']),
      maxBlastRadius: blastRadiusSchema.default('medium'),
      /** Used when a step gives a confidence score but no threshold. */
      defaultThreshold: z.number().min(0).max(1).default(0.9),
    })
    .prefault({}),
  /** Distinct approvers a gate needs; `twoKey` for high blast radius and destructive actions. */
  quorum: z
    .strictObject({
      standard: z.number().int().min(1).max(10).default(1),
      twoKey: z.number().int().min(2).max(10).default(2),
    })
    .prefault({}),
  /** What calls for the two-key quorum, whatever the validation mode. */
  twoKey: z
    .strictObject({ minBlastRadius: blastRadiusSchema.default('high'), destructive: z.boolean().default(true) })
    .prefault({}),
  /** Seed 000 section 4.3: escalate after the SLA, fail the step at the hard limit. */
  sla: z
    .strictObject({
      prodSeconds: z.number().int().min(1).default(600),
      otherSeconds: z.number().int().min(1).default(1800),
      hardLimitSeconds: z.number().int().min(1).default(86_400),
    })
    .prefault({}),
  /** Steps that never run, whatever anyone approves. */
  deny: z.array(matcherSchema).default([]),
  /** Steps that always need a person, whatever the validation mode. */
  requireApproval: z.array(matcherSchema).default([]),
});
export type PolicyDocument = z.infer<typeof policyDocumentSchema>;

export const DEFAULT_POLICY: PolicyDocument = policyDocumentSchema.parse({ version: 1 });

/** A gate: what an approval is for and how many people must approve it. */
export interface GateSpec {
  readonly scope: 'step' | 'phase' | 'run';
  /** The step id, the phase id, or `final` for the run's single gate. */
  readonly scopeId: string;
  readonly requiredApprovals: number;
  readonly blastRadius: BlastRadius;
}

export type PolicyDecision =
  | {
      readonly outcome: 'allow';
      readonly rule: string;
      readonly reason: string;
      /** Set when a gate applied and policy approved it (seed 000 section 4.2), with the numbers. */
      readonly autoApproved?: { readonly gate: GateSpec; readonly confidence: number; readonly threshold: number };
    }
  | { readonly outcome: 'deny'; readonly rule: string; readonly reason: string }
  | { readonly outcome: 'needs_approval'; readonly rule: string; readonly reason: string; readonly gate: GateSpec };

const rank = (radius: BlastRadius) => BLAST_RADII.indexOf(radius);

const matches = (m: PolicyMatcher, runbook: Runbook, step: Step) =>
  (m.environments === undefined || m.environments.includes(runbook.environment)) &&
  (m.backend === undefined || m.backend === step.backend) &&
  (m.action === undefined || m.action === step.action);

/** The highest blast radius among the runbook's steps. */
export function runbookBlastRadius(runbook: Runbook): BlastRadius {
  return allSteps(runbook).reduce<BlastRadius>(
    (max, { step }) => (rank(step.blast_radius) > rank(max) ? step.blast_radius : max),
    'low',
  );
}

/** The SLA and hard limit, in seconds, for a gate in this environment. */
export function approvalDeadlines(policy: Pick<PolicyDocument, 'sla'>, environment: Runbook['environment']) {
  return {
    slaSeconds: environment === 'prod' ? policy.sla.prodSeconds : policy.sla.otherSeconds,
    hardLimitSeconds: policy.sla.hardLimitSeconds,
  };
}

/** The gate the validation mode puts on this step, if any, and why. */
function modeGate(
  runbook: Runbook,
  step: Step,
): { scope: GateSpec['scope']; scopeId: string; reason: string } | 'none' {
  const placed = allSteps(runbook);
  const index = placed.findIndex((p) => p.step.id === step.id);
  const phase = placed[index]?.phase;
  switch (runbook.validation_mode) {
    case 'per_step':
      return { scope: 'step', scopeId: step.id, reason: 'validation mode per_step gates every step' };
    case 'per_phase':
      return {
        scope: 'phase',
        scopeId: phase?.id ?? step.id,
        reason: `validation mode per_phase gates phase '${phase?.id ?? step.id}'`,
      };
    case 'critical_only':
      return step.critical
        ? { scope: 'step', scopeId: step.id, reason: 'the step is critical (validation mode critical_only)' }
        : 'none';
    case 'final_only':
      return index === placed.length - 1
        ? { scope: 'run', scopeId: 'final', reason: 'validation mode final_only gates the run before its last step' }
        : 'none';
  }
}

/**
 * Decides one step. The order is the order of precedence: the sandbox profile and deny rules
 * first (nothing approves a denied step), then the gates (two-key, required-approval rules, the
 * validation mode, a confidence below its threshold), then auto-approval of a gate when the seed's
 * three conditions hold. Throws on a step the runbook does not have; use `decideStep`.
 */
export function decide(policy: PolicyDocument, runbook: Runbook, stepId: string): PolicyDecision {
  const step = allSteps(runbook).find((s) => s.step.id === stepId)?.step;
  if (!step) throw new Error(`the runbook has no step '${stepId}'`);
  const action = `${step.backend}.${step.action}`;
  const spec = findAction(step.backend, step.action);
  if (!spec) throw new Error(`${action} is not in the catalogue`);

  if (!profileAllows(SANDBOX_PROFILES[runbook.sandbox_profile], step.backend, step.action))
    return {
      outcome: 'deny',
      rule: 'sandbox-profile',
      reason: `${action} is not allowed by sandbox profile ${runbook.sandbox_profile}`,
    };
  const denied = policy.deny.find((m) => matches(m, runbook, step));
  if (denied) return { outcome: 'deny', rule: `deny:${denied.id}`, reason: denied.reason };

  const twoKey =
    rank(step.blast_radius) >= rank(policy.twoKey.minBlastRadius) || (policy.twoKey.destructive && spec.destructive);
  const required = policy.requireApproval.find((m) => matches(m, runbook, step));
  const byMode = modeGate(runbook, step);
  const confidence = step.confidence_score;
  const threshold = step.auto_approve_threshold ?? policy.autoApproval.defaultThreshold;
  const unsure = confidence !== undefined && confidence < threshold;

  let gate: { scope: GateSpec['scope']; scopeId: string; rule: string; reason: string } | undefined;
  if (twoKey)
    gate = {
      scope: 'step',
      scopeId: step.id,
      rule: 'two-key',
      reason: spec.destructive
        ? `${action} is destructive: two people must approve it`
        : `blast radius ${step.blast_radius}: two people must approve it`,
    };
  else if (required)
    gate = { scope: 'step', scopeId: step.id, rule: `require:${required.id}`, reason: required.reason };
  else if (byMode !== 'none') gate = { ...byMode, rule: `mode:${runbook.validation_mode}` };
  else if (unsure)
    gate = {
      scope: 'step',
      scopeId: step.id,
      rule: 'low-confidence',
      reason: `confidence ${confidence} is below the auto-approval threshold ${threshold}`,
    };
  if (!gate) return { outcome: 'allow', rule: 'no-gate', reason: `no rule gates ${action} in ${runbook.environment}` };

  const gateSpec: GateSpec = {
    scope: gate.scope,
    scopeId: gate.scopeId,
    requiredApprovals: twoKey ? policy.quorum.twoKey : policy.quorum.standard,
    blastRadius: gate.scope === 'step' ? step.blast_radius : runbookBlastRadius(runbook),
  };
  const auto = policy.autoApproval;
  if (
    !twoKey &&
    !required &&
    confidence !== undefined &&
    confidence >= threshold &&
    rank(gateSpec.blastRadius) <= rank(auto.maxBlastRadius) &&
    auto.environments.includes(runbook.environment)
  )
    return {
      outcome: 'allow',
      rule: 'auto-approval',
      reason: `${gate.reason}; approved by policy: confidence ${confidence} >= threshold ${threshold}, blast radius ${gateSpec.blastRadius}, ${runbook.environment}`,
      autoApproved: { gate: gateSpec, confidence, threshold },
    };
  return { outcome: 'needs_approval', rule: gate.rule, reason: gate.reason, gate: gateSpec };
}

/** `decide`, failing closed: anything that goes wrong while deciding is a deny with the cause. */
export function decideStep(policy: PolicyDocument | Error, runbook: Runbook, stepId: string): PolicyDecision {
  try {
    if (policy instanceof Error) throw policy;
    return decide(policy, runbook, stepId);
  } catch (error) {
    return {
      outcome: 'deny',
      rule: 'fail-closed',
      reason: `the policy could not decide, so the step is denied: ${(error as Error).message}`,
    };
  }
}

/** The gate a decision puts on its step, approved by people or by policy; none when it has none. */
function gateOf(verdict: PolicyDecision): GateSpec | undefined {
  if (verdict.outcome === 'needs_approval') return verdict.gate;
  return verdict.outcome === 'allow' ? verdict.autoApproved?.gate : undefined;
}

/**
 * Decides a unit of dispatch: a step, or a pipeline phase named by its first step. A pipeline's
 * targets go from one step to the next without coming back to the planner, so the phase is
 * decided once, for all its steps, before its first target starts: a denied step denies the phase,
 * and a gate on any step gates the phase, with the largest quorum and blast radius among them. A
 * phase whose later steps add nothing is decided as its first step alone.
 */
export function decideUnit(policy: PolicyDocument | Error, runbook: Runbook, stepId: string): PolicyDecision {
  const phase = runbook.phases.find((p) => p.steps.some((s) => s.id === stepId));
  if (!phase || phase.mode !== 'pipeline' || phase.steps[0]?.id !== stepId) return decideStep(policy, runbook, stepId);
  const verdicts = phase.steps.map((s) => ({ stepId: s.id, verdict: decideStep(policy, runbook, s.id) }));
  const [head] = verdicts;
  if (!head) return decideStep(policy, runbook, stepId);
  const named = (v: { stepId: string; verdict: PolicyDecision }) =>
    v === head ? v.verdict.reason : `step '${v.stepId}' of pipeline phase '${phase.id}': ${v.verdict.reason}`;

  const denied = verdicts.find((v) => v.verdict.outcome === 'deny');
  if (denied) return { outcome: 'deny', rule: denied.verdict.rule, reason: named(denied) };

  // The first step's gate stands for the phase when no later gate asks for more: more people, a
  // larger blast radius, or people where the first step's gate was approved by policy.
  const headGate = gateOf(head.verdict);
  const gating = verdicts.filter((v) => gateOf(v.verdict) !== undefined);
  const coveredByHead = (v: (typeof verdicts)[number]) => {
    const gate = gateOf(v.verdict);
    return (
      gate !== undefined &&
      headGate !== undefined &&
      (head.verdict.outcome === 'needs_approval' || v.verdict.outcome !== 'needs_approval') &&
      headGate.requiredApprovals >= gate.requiredApprovals &&
      rank(headGate.blastRadius) >= rank(gate.blastRadius)
    );
  };
  if (gating.every((v) => v === head || coveredByHead(v))) return head.verdict;

  // People must approve when any step needs them; policy approves only when it approves every gate.
  const human = gating.filter((v) => v.verdict.outcome === 'needs_approval');
  const deciding = human.length > 0 ? human : gating;
  const gates = deciding.flatMap((v) => gateOf(v.verdict) ?? []);
  const strongest = deciding.reduce((best, v) =>
    (gateOf(v.verdict)?.requiredApprovals ?? 0) > (gateOf(best.verdict)?.requiredApprovals ?? 0) ? v : best,
  );
  const gate: GateSpec = {
    scope: 'phase',
    scopeId: phase.id,
    requiredApprovals: Math.max(...gates.map((g) => g.requiredApprovals)),
    blastRadius: gates.reduce<BlastRadius>((max, g) => (rank(g.blastRadius) > rank(max) ? g.blastRadius : max), 'low'),
  };
  const reason = deciding.map(named).join('; ');
  if (human.length > 0) return { outcome: 'needs_approval', rule: strongest.verdict.rule, reason, gate };
  const auto = strongest.verdict.outcome === 'allow' ? strongest.verdict.autoApproved : undefined;
  if (!auto) return decideStep(policy, runbook, stepId);
  return { outcome: 'allow', rule: strongest.verdict.rule, reason, autoApproved: { ...auto, gate } };
}

/** Parses a policy document (JSON text); an invalid one is returned as the error every decision denies with. */
export function parsePolicy(text: string | undefined): PolicyDocument | Error {
  if (text === undefined || text.trim() === '') return DEFAULT_POLICY;
  try {
    const parsed = policyDocumentSchema.safeParse(JSON.parse(text));
    if (parsed.success) return parsed.data;
    const issue = parsed.error.issues[0];
    return new Error(`the policy document is not valid: ${issue?.path.join('.') ?? ''}: ${issue?.message ?? ''}`);
  } catch (error) {
    return new Error(`the policy document is not valid JSON: ${(error as Error).message}`);
  }
}

/**
 * True when `policy` may put a gate on some step of `runbook` (asking people, or approving by
 * policy): a runbook it cannot gate never has an approval, so there is none to look up.
 */
export function policyMayGate(policy: PolicyDocument | Error, runbook: Runbook): boolean {
  return allSteps(runbook).some(({ step }) => {
    const verdict = decideStep(policy, runbook, step.id);
    return verdict.outcome === 'needs_approval' || (verdict.outcome === 'allow' && verdict.autoApproved !== undefined);
  });
}
