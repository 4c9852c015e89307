import { describe, expect, it } from 'vitest';
import { DEFAULT_POLICY, policyDocumentSchema, policyMayGate } from '../../../shared/domain/policy.js';
import { parseRunbookObject, type Runbook } from '../../../shared/domain/runbook.js';

const ECHO = { backend: 'test', action: 'echo', params: { message: 'x' } };

const runbook = (step: Record<string, unknown>): Runbook =>
  parseRunbookObject({
    name: 'r',
    environment: 'dev',
    sandbox_profile: 'dev-flex',
    steps: [
      { id: 'first', ...ECHO },
      { id: 's', ...ECHO, ...step },
    ],
  });

describe('whether a policy may gate a runbook', () => {
  it('says no for low blast radius steps no rule names', () => {
    expect(policyMayGate(DEFAULT_POLICY, runbook({}))).toBe(false);
  });

  it('says yes when one step needs two approvers', () => {
    expect(policyMayGate(DEFAULT_POLICY, runbook({ blast_radius: 'high' }))).toBe(true);
  });

  it('says yes when a rule requires approval for one step', () => {
    const policy = policyDocumentSchema.parse({
      version: 1,
      requireApproval: [{ id: 'echo', action: 'echo', reason: 'look first' }],
    });
    expect(policyMayGate(policy, runbook({}))).toBe(true);
  });

  it('says yes when a step is below its confidence threshold', () => {
    expect(policyMayGate(DEFAULT_POLICY, runbook({ confidence_score: 0.5 }))).toBe(true);
  });

  it('says yes when a gate would be approved by policy, since that approval is recorded too', () => {
    const gatedByMode = parseRunbookObject({
      name: 'r',
      environment: 'dev',
      sandbox_profile: 'dev-flex',
      validation_mode: 'per_step',
      steps: [{ id: 's', ...ECHO, confidence_score: 0.95 }],
    });
    expect(policyMayGate(DEFAULT_POLICY, gatedByMode)).toBe(true);
  });

  it('says no when the policy failed to load: every step is denied, none gated', () => {
    expect(policyMayGate(new Error('bad policy'), runbook({ blast_radius: 'high' }))).toBe(false);
  });
});
