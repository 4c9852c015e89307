import { describe, expect, it } from 'vitest';
import {
  decide,
  decideStep,
  decideUnit,
  DEFAULT_POLICY,
  parsePolicy,
  type PolicyDocument,
  policyDocumentSchema,
} from '../../../shared/domain/policy.js';
import { parseRunbookObject, type Runbook } from '../../../shared/domain/runbook.js';

type StepDoc = Record<string, unknown>;
const ECHO = { backend: 'test', action: 'echo', params: { message: 'x' } };
const SCRIPT = { backend: 'script', action: 'run', params: { script: 'echo-args' } };

function runbook(
  environment: 'dev' | 'staging' | 'prod',
  step: StepDoc,
  extra: Record<string, unknown> = {},
  profile = { dev: 'dev-flex', staging: 'staging-standard', prod: 'prod-standard' }[environment],
): Runbook {
  return parseRunbookObject({
    name: 'r',
    environment,
    sandbox_profile: profile,
    steps: [
      { id: 'first', ...ECHO },
      { id: 's', ...step },
    ],
    ...extra,
  });
}

const policy = (doc: Record<string, unknown> = {}): PolicyDocument =>
  policyDocumentSchema.parse({ version: 1, ...doc });

/** One row: a runbook, a step of it, a policy; the outcome, the rule that decided and the quorum. */
interface Row {
  readonly name: string;
  readonly runbook: Runbook;
  readonly stepId?: string;
  readonly policy?: PolicyDocument;
  readonly outcome: 'allow' | 'deny' | 'needs_approval';
  readonly rule: string;
  readonly quorum?: number;
  readonly scope?: string;
}

const rows: Row[] = [
  // The sandbox profile and deny rules come first: nothing approves a denied step.
  {
    name: 'a profile that does not allow the action denies it',
    runbook: runbook('prod', { ...SCRIPT, rollback: ECHO }, {}, 'prod-critical'),
    outcome: 'deny',
    rule: 'sandbox-profile',
  },
  {
    name: 'a deny rule of the policy document denies a matching step',
    runbook: runbook('staging', { backend: 'http', action: 'get', params: { url: 'http://x' } }),
    policy: policy({ deny: [{ id: 'no-http-staging', environments: ['staging'], backend: 'http', reason: 'no' }] }),
    outcome: 'deny',
    rule: 'deny:no-http-staging',
  },
  {
    name: 'a deny rule for another environment does not match',
    runbook: runbook('dev', { backend: 'http', action: 'get', params: { url: 'http://x' } }),
    policy: policy({ deny: [{ id: 'no-http-staging', environments: ['staging'], backend: 'http', reason: 'no' }] }),
    outcome: 'allow',
    rule: 'no-gate',
  },
  // per_step (the default in prod and with a high blast radius).
  {
    name: 'per_step gates every step in prod, one approver',
    runbook: runbook('prod', ECHO),
    outcome: 'needs_approval',
    rule: 'mode:per_step',
    quorum: 1,
    scope: 'step.s',
  },
  {
    name: 'per_step in prod is never auto-approved, whatever the confidence',
    runbook: runbook('prod', { ...ECHO, confidence_score: 0.99, auto_approve_threshold: 0.5 }),
    outcome: 'needs_approval',
    rule: 'mode:per_step',
    quorum: 1,
  },
  {
    name: 'per_step in dev is auto-approved at confidence >= threshold and blast radius <= medium',
    runbook: runbook(
      'dev',
      { ...ECHO, blast_radius: 'medium', confidence_score: 0.9, auto_approve_threshold: 0.9 },
      {
        validation_mode: 'per_step',
      },
    ),
    outcome: 'allow',
    rule: 'auto-approval',
  },
  {
    name: 'per_step in dev below the threshold waits for a person',
    runbook: runbook(
      'dev',
      { ...ECHO, confidence_score: 0.89, auto_approve_threshold: 0.9 },
      {
        validation_mode: 'per_step',
      },
    ),
    outcome: 'needs_approval',
    rule: 'mode:per_step',
    quorum: 1,
  },
  {
    name: 'per_step in staging without a confidence score waits for a person',
    runbook: runbook('staging', ECHO, { validation_mode: 'per_step' }),
    outcome: 'needs_approval',
    rule: 'mode:per_step',
  },
  // The two-key rule, in every mode.
  {
    name: 'a high blast radius needs two approvers, and no auto-approval',
    runbook: runbook('staging', { ...ECHO, blast_radius: 'high', confidence_score: 1, auto_approve_threshold: 0.1 }),
    outcome: 'needs_approval',
    rule: 'two-key',
    quorum: 2,
  },
  {
    name: 'a destructive action needs two approvers even in dev under critical_only',
    runbook: runbook('dev', SCRIPT),
    outcome: 'needs_approval',
    rule: 'two-key',
    quorum: 2,
    scope: 'step.s',
  },
  {
    name: 'the two-key quorum is configurable',
    runbook: runbook('dev', SCRIPT),
    policy: policy({ quorum: { twoKey: 3 } }),
    outcome: 'needs_approval',
    rule: 'two-key',
    quorum: 3,
  },
  {
    name: 'a deployment may drop the two-key rule for destructive actions',
    runbook: runbook('dev', SCRIPT),
    policy: policy({ twoKey: { destructive: false } }),
    outcome: 'allow',
    rule: 'no-gate',
  },
  // critical_only (the default elsewhere).
  {
    name: 'critical_only lets a step that is not critical run',
    runbook: runbook('dev', ECHO),
    outcome: 'allow',
    rule: 'no-gate',
  },
  {
    name: 'critical_only gates a critical step',
    runbook: runbook('staging', { ...ECHO, critical: true }),
    outcome: 'needs_approval',
    rule: 'mode:critical_only',
    quorum: 1,
  },
  {
    name: 'critical_only auto-approves a critical step in staging at confidence >= threshold',
    runbook: runbook('staging', { ...ECHO, critical: true, confidence_score: 0.95 }),
    outcome: 'allow',
    rule: 'auto-approval',
  },
  {
    name: 'critical_only in prod never auto-approves',
    runbook: runbook('prod', { ...ECHO, critical: true, confidence_score: 0.99 }, { validation_mode: 'critical_only' }),
    outcome: 'needs_approval',
    rule: 'mode:critical_only',
  },
  {
    name: 'critical_only gates a step whose confidence is below its threshold',
    runbook: runbook('dev', { ...ECHO, confidence_score: 0.5, auto_approve_threshold: 0.8 }),
    outcome: 'needs_approval',
    rule: 'low-confidence',
    quorum: 1,
  },
  {
    name: 'critical_only lets a step at or above its threshold run',
    runbook: runbook('dev', { ...ECHO, confidence_score: 0.8, auto_approve_threshold: 0.8 }),
    outcome: 'allow',
    rule: 'no-gate',
  },
  // per_phase and final_only.
  {
    name: 'per_phase gates the phase, not the step',
    runbook: parseRunbookObject({
      name: 'r',
      environment: 'staging',
      sandbox_profile: 'staging-standard',
      validation_mode: 'per_phase',
      phases: [
        { id: 'pre', steps: [{ id: 'first', ...ECHO }] },
        { id: 'main', steps: [{ id: 's', ...ECHO }] },
      ],
    }),
    outcome: 'needs_approval',
    rule: 'mode:per_phase',
    scope: 'phase.main',
  },
  {
    name: 'final_only gates the run before its last step',
    runbook: runbook('staging', ECHO, { validation_mode: 'final_only' }),
    outcome: 'needs_approval',
    rule: 'mode:final_only',
    scope: 'run.final',
  },
  {
    name: 'final_only lets the steps before the last run',
    runbook: runbook('staging', ECHO, { validation_mode: 'final_only' }),
    stepId: 'first',
    outcome: 'allow',
    rule: 'no-gate',
  },
  // Rules from the policy document.
  {
    name: 'a require-approval rule gates a matching step and rules out auto-approval',
    runbook: runbook('dev', {
      backend: 'http',
      action: 'post',
      params: { url: 'http://x' },
      confidence_score: 1,
    }),
    policy: policy({ requireApproval: [{ id: 'posts', backend: 'http', action: 'post', reason: 'writes' }] }),
    outcome: 'needs_approval',
    rule: 'require:posts',
    quorum: 1,
  },
  {
    name: 'auto-approval can be limited to dev',
    runbook: runbook('staging', { ...ECHO, critical: true, confidence_score: 0.95 }),
    policy: policy({ autoApproval: { environments: ['dev'] } }),
    outcome: 'needs_approval',
    rule: 'mode:critical_only',
  },
];

describe('the policy engine', () => {
  it.each(rows)('$name', (row) => {
    const decision = decide(row.policy ?? DEFAULT_POLICY, row.runbook, row.stepId ?? 's');
    expect(decision.outcome).toBe(row.outcome);
    expect(decision.rule).toBe(row.rule);
    expect(decision.reason.length).toBeGreaterThan(0);
    if (decision.outcome === 'needs_approval') {
      if (row.quorum !== undefined) expect(decision.gate.requiredApprovals).toBe(row.quorum);
      if (row.scope !== undefined) expect(`${decision.gate.scope}.${decision.gate.scopeId}`).toBe(row.scope);
    }
  });

  it('records the numbers of an auto-approval', () => {
    const decision = decide(
      DEFAULT_POLICY,
      runbook('staging', { ...ECHO, critical: true, blast_radius: 'medium', confidence_score: 0.95 }),
      's',
    );
    expect(decision).toMatchObject({
      outcome: 'allow',
      autoApproved: { confidence: 0.95, threshold: 0.9, gate: { scope: 'step', scopeId: 's', blastRadius: 'medium' } },
    });
  });

  describe('fails closed', () => {
    it('denies every step when the policy document did not load', () => {
      const broken = parsePolicy('{"version": 1, "quorum": {"twoKey": 1}}');
      expect(broken).toBeInstanceOf(Error);
      expect(decideStep(broken, runbook('dev', ECHO), 's')).toMatchObject({ outcome: 'deny', rule: 'fail-closed' });
    });

    it('denies a step it cannot find', () => {
      expect(decideStep(DEFAULT_POLICY, runbook('dev', ECHO), 'nope')).toMatchObject({
        outcome: 'deny',
        rule: 'fail-closed',
        reason: expect.stringContaining("no step 'nope'"),
      });
    });

    it('denies when a rule throws while deciding', () => {
      const throwing = {
        ...DEFAULT_POLICY,
        get deny(): never {
          throw new Error('rule store unavailable');
        },
      } as PolicyDocument;
      expect(decideStep(throwing, runbook('dev', ECHO), 's')).toMatchObject({
        outcome: 'deny',
        reason: expect.stringContaining('rule store unavailable'),
      });
    });
  });

  describe('policy documents', () => {
    it('uses the defaults when none is configured', () => {
      expect(parsePolicy(undefined)).toEqual(DEFAULT_POLICY);
      expect(DEFAULT_POLICY).toMatchObject({
        quorum: { standard: 1, twoKey: 2 },
        sla: { prodSeconds: 600, otherSeconds: 1800, hardLimitSeconds: 86_400 },
        autoApproval: { environments: ['dev', 'staging'], maxBlastRadius: 'medium' },
      });
    });

    it('names the field that is wrong, and says when it is not JSON', () => {
      expect((parsePolicy('{"version": 1, "sla": {"prodSeconds": 0}}') as Error).message).toContain('sla.prodSeconds');
      expect((parsePolicy('{nope') as Error).message).toContain('not valid JSON');
      expect((parsePolicy('{"version": 2}') as Error).message).toContain('version');
    });
  });
});

describe('a pipeline phase, decided once for all its steps', () => {
  const pipeline = (second: StepDoc, environment: 'dev' | 'prod' = 'dev') =>
    parseRunbookObject({
      name: 'r',
      environment,
      sandbox_profile: environment === 'dev' ? 'dev-flex' : 'prod-standard',
      phases: [
        {
          id: 'roll',
          mode: 'pipeline',
          steps: [
            { id: 'drain', ...ECHO },
            { id: 'later', ...second },
          ],
        },
      ],
    });

  it('is denied when a later step is denied, naming that step', () => {
    const verdict = decideUnit(
      policy({ deny: [{ id: 'no-scripts', backend: 'script', reason: 'scripts are off' }] }),
      pipeline(SCRIPT),
      'drain',
    );
    expect(verdict).toMatchObject({ outcome: 'deny', rule: 'deny:no-scripts' });
    expect(verdict.reason).toBe("step 'later' of pipeline phase 'roll': scripts are off");
    // The first step alone would have been allowed: the phase is what is decided.
    expect(
      decideStep(policy({ deny: [{ id: 'no-scripts', backend: 'script', reason: 'x' }] }), pipeline(SCRIPT), 'drain')
        .outcome,
    ).toBe('allow');
  });

  it('is gated for the whole phase, with the largest quorum, when a later step needs two people', () => {
    const verdict = decideUnit(DEFAULT_POLICY, pipeline(SCRIPT), 'drain');
    expect(verdict).toMatchObject({
      outcome: 'needs_approval',
      rule: 'two-key',
      gate: { scope: 'phase', scopeId: 'roll', requiredApprovals: 2 },
    });
    expect(verdict.reason).toContain("step 'later' of pipeline phase 'roll'");
  });

  it('is decided as its first step when the later steps add no gate', () => {
    const rb = pipeline(ECHO);
    expect(decideUnit(DEFAULT_POLICY, rb, 'drain')).toEqual(decideStep(DEFAULT_POLICY, rb, 'drain'));
    const perPhase = parseRunbookObject({ ...pipelineDoc(), validation_mode: 'per_phase' });
    expect(decideUnit(DEFAULT_POLICY, perPhase, 'drain')).toEqual(decideStep(DEFAULT_POLICY, perPhase, 'drain'));
  });

  it("keeps the first step's gate for the phase when it asks for as much as every later one", () => {
    const rb = parseRunbookObject({
      name: 'r',
      environment: 'prod',
      sandbox_profile: 'prod-standard',
      validation_mode: 'per_phase',
      phases: [
        {
          id: 'roll',
          mode: 'pipeline',
          steps: [
            { id: 'drain', ...ECHO, blast_radius: 'high' },
            { id: 'restart', ...ECHO, blast_radius: 'high' },
            { id: 'verify', ...ECHO },
          ],
        },
      ],
    });
    expect(decideUnit(DEFAULT_POLICY, rb, 'drain')).toEqual(decideStep(DEFAULT_POLICY, rb, 'drain'));
    expect(decideUnit(DEFAULT_POLICY, rb, 'drain')).toMatchObject({
      outcome: 'needs_approval',
      gate: { scope: 'step', scopeId: 'drain', requiredApprovals: 2 },
    });
  });

  it('leaves a step outside a pipeline to its own decision', () => {
    const rb = runbook('dev', SCRIPT);
    expect(decideUnit(DEFAULT_POLICY, rb, 's')).toEqual(decideStep(DEFAULT_POLICY, rb, 's'));
  });
});

function pipelineDoc(): Record<string, unknown> {
  return {
    name: 'r',
    environment: 'dev',
    sandbox_profile: 'dev-flex',
    phases: [
      {
        id: 'roll',
        mode: 'pipeline',
        steps: [
          { id: 'drain', ...ECHO },
          { id: 'later', ...ECHO },
        ],
      },
    ],
  };
}
