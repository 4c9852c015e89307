import { z } from 'zod';
import { canonicalJson, type Json, sha256Hex } from './canonical.js';
import { checkAction, findAction } from './catalogue.js';
import { durationSchema } from './duration.js';
import { ValidationError } from './errors.js';
import { MAX_RUNBOOK_BYTES, storableJson, storableJsonObject } from './storable.js';
import { environmentSchema, SANDBOX_PROFILES, sandboxProfileNameSchema } from './sandbox-profiles.js';
import { checkPlaceholders, findPlaceholders, substitute } from './template.js';
import { formatIssues, formatPath, type PathSegment, type RawIssue, rawIssuesFromZod } from './zod-issues.js';

const idSchema = z
  .string()
  .regex(
    /^[a-z0-9][a-z0-9_-]{0,62}$/,
    'must be 1-63 lower-case letters, digits, - or _, starting with a letter or digit',
  );

/** `3` or `"25%"`: how many targets run at once, or may fail before the step stops. */
const countOrPercentSchema = z.union([
  z.number().int().min(0),
  z.string().regex(/^(100|[1-9]?[0-9])%$/, 'must be a whole number or a percentage such as 25%'),
]);

export const targetSchema = z.union([
  z.strictObject({ all: z.literal(true) }),
  z.strictObject({ group: z.string().min(1) }),
  z.strictObject({ node: z.string().min(1) }),
]);
export type Target = z.infer<typeof targetSchema>;

const secretIdSchema = z.string().regex(/^[A-Za-z0-9/_+=.@-]{1,512}$/, 'must be a secret name or ARN');

/** What a rollback does: an action of its own, never another rollback. */
export const rollbackStepSchema = z.strictObject({
  backend: z.string().min(1),
  action: z.string().min(1),
  params: storableJsonObject().default({}),
  timeout: durationSchema.optional(),
  secrets: z.array(secretIdSchema).default([]),
});
export type RollbackStep = z.infer<typeof rollbackStepSchema>;

export const CONDITIONS = ['always', 'on_success', 'on_failure'] as const;
export const BLAST_RADII = ['low', 'medium', 'high'] as const;
export const blastRadiusSchema = z.enum(BLAST_RADII);
export type BlastRadius = z.infer<typeof blastRadiusSchema>;

export const stepSchema = z.strictObject({
  id: idSchema,
  name: z.string().max(200).optional(),
  description: z.string().max(2000).optional(),
  backend: z.string().min(1),
  action: z.string().min(1),
  params: storableJsonObject().default({}),
  target: targetSchema.optional(),
  max_concurrency: countOrPercentSchema.optional(),
  max_errors: countOrPercentSchema.optional(),
  /** `exponential`: 1 target, then 2, 4, ... up to `max_concurrency`, as each wave ends. */
  ramp: z.literal('exponential').optional(),
  /** When the target resolves to no node: the step fails (default) or is skipped. */
  if_no_targets: z.enum(['fail', 'skip']).default('fail'),
  timeout: durationSchema.default('5m'),
  retries: z.number().int().min(0).max(10).default(0),
  rollback: rollbackStepSchema.optional(),
  condition: z.enum(CONDITIONS).default('on_success'),
  critical: z.boolean().default(false),
  blast_radius: blastRadiusSchema.default('low'),
  confidence_score: z.number().min(0).max(1).optional(),
  auto_approve_threshold: z.number().min(0).max(1).optional(),
  secrets: z.array(secretIdSchema).default([]),
});
export type Step = z.infer<typeof stepSchema>;

export const PHASE_MODES = ['barrier', 'pipeline'] as const;

export const phaseSchema = z.strictObject({
  id: idSchema,
  description: z.string().max(2000).optional(),
  mode: z.enum(PHASE_MODES).default('barrier'),
  /** Whether the phase runs at all, given what failed before it; each step's own condition then applies. */
  condition: z.enum(CONDITIONS).optional(),
  /** Rate control of a pipeline phase: how many targets are in the phase at once, and may fail. */
  max_concurrency: countOrPercentSchema.optional(),
  max_errors: countOrPercentSchema.optional(),
  ramp: z.literal('exponential').optional(),
  steps: z.array(stepSchema).min(1, 'a phase needs at least one step'),
});
export type Phase = z.infer<typeof phaseSchema>;

export const INPUT_TYPES = ['string', 'number', 'boolean', 'list', 'object'] as const;

export const inputSpecSchema = z.strictObject({
  type: z.enum(INPUT_TYPES),
  description: z.string().max(2000).optional(),
  default: storableJson().optional(),
  required: z.boolean().optional(),
  enum: z
    .array(z.union([z.string(), z.number()]))
    .min(1)
    .optional(),
});
export type InputSpec = z.infer<typeof inputSpecSchema>;

export const VALIDATION_MODES = ['per_step', 'per_phase', 'critical_only', 'final_only'] as const;
export const validationModeSchema = z.enum(VALIDATION_MODES);
export type ValidationMode = z.infer<typeof validationModeSchema>;

const runbookShape = {
  name: idSchema,
  description: z.string().max(2000).optional(),
  environment: environmentSchema,
  sandbox_profile: sandboxProfileNameSchema,
  validation_mode: validationModeSchema.optional(),
  strategy: z.enum(['fail-fast', 'continue']).default('fail-fast'),
  /** A run that fails for good raises an incident (event, notify webhook, a flag an operator acknowledges). */
  escalate_on_failure: z.boolean().optional(),
  timeout: durationSchema.default('1h'),
  inputs: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an identifier'), inputSpecSchema).default({}),
};

/** The document as written: `steps` (one phase) or `phases`. */
export const runbookDocumentSchema = z.strictObject({
  ...runbookShape,
  steps: z.array(stepSchema).min(1, 'a runbook needs at least one step').optional(),
  phases: z.array(phaseSchema).min(1, 'a runbook needs at least one phase').optional(),
});

/** A validated runbook in its normal form: always `phases`, defaults filled in. */
export const runbookSchema = z.strictObject({
  ...runbookShape,
  validation_mode: validationModeSchema,
  phases: z.array(phaseSchema).min(1),
});
export type Runbook = z.infer<typeof runbookSchema>;

/** Default validation mode (seed 000 section 4.1): per_step in prod or with a high-blast-radius step. */
export function defaultValidationMode(environment: Runbook['environment'], steps: readonly Step[]): ValidationMode {
  if (environment === 'prod' || steps.some((s) => s.blast_radius === 'high')) return 'per_step';
  return 'critical_only';
}

/** Every step of the runbook, in order, with where it stands in the document. */
export function allSteps(runbook: Pick<Runbook, 'phases'>): Array<{ step: Step; phase: Phase; path: PathSegment[] }> {
  return runbook.phases.flatMap((phase, p) =>
    phase.steps.map((step, s) => ({ step, phase, path: ['phases', p, 'steps', s] as PathSegment[] })),
  );
}

function inputTypeMatches(type: InputSpec['type'], value: Json): boolean {
  switch (type) {
    case 'string':
      return typeof value === 'string';
    case 'number':
      return typeof value === 'number';
    case 'boolean':
      return typeof value === 'boolean';
    case 'list':
      return Array.isArray(value);
    case 'object':
      return value !== null && typeof value === 'object' && !Array.isArray(value);
  }
}

/** Checks that no plain-object field hides a nested phase or rollback where the schema has none. */
function structuralIssues(doc: unknown): RawIssue[] {
  const issues: RawIssue[] = [];
  if (!isRecord(doc)) return issues;
  const stepLists: Array<{ steps: unknown; path: PathSegment[] }> = [];
  if (Array.isArray(doc.steps)) stepLists.push({ steps: doc.steps, path: ['steps'] });
  if (Array.isArray(doc.phases)) {
    doc.phases.forEach((phase, p) => {
      if (!isRecord(phase)) return;
      if ('phases' in phase) {
        issues.push({
          path: ['phases', p, 'phases'],
          message: 'phases cannot be nested: a pipeline or barrier phase holds steps, not phases',
        });
      }
      if (Array.isArray(phase.steps)) stepLists.push({ steps: phase.steps, path: ['phases', p, 'steps'] });
    });
  }
  for (const { steps, path } of stepLists) {
    (steps as unknown[]).forEach((step, s) => {
      if (!isRecord(step)) return;
      if ('steps' in step || 'phases' in step || 'mode' in step) {
        issues.push({
          path: [...path, s],
          message: 'a step cannot hold steps or phases: put them in a phase of their own',
        });
      }
      if (isRecord(step.rollback) && 'rollback' in step.rollback) {
        issues.push({
          path: [...path, s, 'rollback', 'rollback'],
          message: 'a rollback step cannot have a rollback of its own',
        });
      }
    });
  }
  return issues;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** Cross-field rules the per-field schema cannot express. */
function semanticIssues(runbook: Runbook): RawIssue[] {
  const issues: RawIssue[] = [];
  const declared = new Set(Object.keys(runbook.inputs));
  const profile = SANDBOX_PROFILES[runbook.sandbox_profile];

  if (profile.environment !== runbook.environment) {
    issues.push({
      path: ['sandbox_profile'],
      message: `profile '${profile.name}' is for ${profile.environment}, but the runbook's environment is ${runbook.environment}`,
    });
  }
  for (const [name, spec] of Object.entries(runbook.inputs)) {
    if (spec.default !== undefined && !inputTypeMatches(spec.type, spec.default)) {
      issues.push({ path: ['inputs', name, 'default'], message: `default must be a ${spec.type}` });
    }
  }

  const phaseIds = new Map<string, number>();
  runbook.phases.forEach((phase, p) => {
    const seen = phaseIds.get(phase.id);
    if (seen !== undefined)
      issues.push({
        path: ['phases', p, 'id'],
        message: `duplicate phase id '${phase.id}' (also phases[${seen}])`,
      });
    else phaseIds.set(phase.id, p);
    if (phase.mode === 'pipeline') {
      const first = canonicalJson(phase.steps[0]?.target ?? null);
      phase.steps.forEach((step, s) => {
        if (canonicalJson(step.target ?? null) !== first) {
          issues.push({
            path: ['phases', p, 'steps', s, 'target'],
            message: 'every step of a pipeline phase must have the same target: each target runs the phase on its own',
          });
        }
        for (const limit of ['max_concurrency', 'max_errors', 'ramp'] as const) {
          if (step[limit] !== undefined)
            issues.push({
              path: ['phases', p, 'steps', s, limit],
              message: `in a pipeline phase, ${limit} belongs to the phase: targets enter the phase, not each step`,
            });
        }
      });
    } else {
      for (const limit of ['max_concurrency', 'max_errors', 'ramp'] as const) {
        if (phase[limit] !== undefined)
          issues.push({
            path: ['phases', p, limit],
            message: `${limit} on a phase applies to pipeline phases; in a barrier phase put it on the step`,
          });
      }
    }
    if (phase.max_concurrency === 0 || phase.max_concurrency === '0%')
      issues.push({ path: ['phases', p, 'max_concurrency'], message: 'must be at least 1 or 1%' });
    if (phase.ramp !== undefined && phase.max_concurrency === undefined)
      issues.push({ path: ['phases', p, 'ramp'], message: 'ramp needs a max_concurrency to ramp up to' });
  });

  const stepIds = new Map<string, string>();
  const sampleInputs = Object.fromEntries(
    Object.entries(runbook.inputs).flatMap(([k, spec]) => (spec.default === undefined ? [] : [[k, spec.default]])),
  ) as Record<string, Json>;
  const highOrCritical = allSteps(runbook).some(({ step }) => step.blast_radius !== 'low' || step.critical);
  if (runbook.validation_mode === 'final_only' && highOrCritical) {
    issues.push({
      path: ['validation_mode'],
      message: 'final_only is allowed only when every step has blast_radius low and none is critical',
    });
  }

  for (const { step, path } of allSteps(runbook)) {
    const seen = stepIds.get(step.id);
    if (seen !== undefined)
      issues.push({ path: [...path, 'id'], message: `duplicate step id '${step.id}' (also ${seen})` });
    else stepIds.set(step.id, formatPath(path));

    for (const [field, params, backend, action] of [
      ['params', step.params, step.backend, step.action],
      ...(step.rollback
        ? [['rollback', step.rollback.params, step.rollback.backend, step.rollback.action] as const]
        : []),
    ] as const) {
      const at: PathSegment[] = field === 'params' ? path : [...path, 'rollback'];
      const placeholderIssues = checkPlaceholders(params, declared, [...at, 'params'], step.target !== undefined);
      issues.push(...placeholderIssues);
      if (placeholderIssues.length > 0) continue;
      // Params that use inputs without defaults are checked again when a run supplies the inputs.
      const resolvable = findPlaceholders(params).every(
        (p) => p.input !== undefined && Object.hasOwn(sampleInputs, p.input),
      );
      // Params that name the target are checked against each node when the step is dispatched.
      const candidate = resolvable ? substitute(params as Json, sampleInputs) : undefined;
      const check = checkAction(backend, action, candidate, at);
      if (!check.ok) issues.push(...check.issues.filter((i) => resolvable || !i.path.includes('params')));
    }

    if (step.auto_approve_threshold !== undefined && step.confidence_score === undefined) {
      issues.push({
        path: [...path, 'confidence_score'],
        message: 'auto_approve_threshold needs a confidence_score to compare with',
      });
    }
    if (profile.rollbackRequired && !step.rollback && findAction(step.backend, step.action)?.destructive) {
      issues.push({
        path: [...path, 'rollback'],
        message: `profile '${profile.name}' requires a rollback on every destructive step`,
      });
    }
    for (const limit of ['max_concurrency'] as const) {
      if (step[limit] === 0 || step[limit] === '0%')
        issues.push({ path: [...path, limit], message: 'must be at least 1 or 1%' });
    }
    if (step.ramp !== undefined && step.max_concurrency === undefined)
      issues.push({ path: [...path, 'ramp'], message: 'ramp needs a max_concurrency to ramp up to' });
  }
  return issues;
}

/**
 * Validates a runbook document (already read from YAML or JSON) and returns its normal form.
 * Returns every issue found, with structured paths, so a caller can add line numbers.
 */
export function validateRunbook(doc: unknown): { ok: true; runbook: Runbook } | { ok: false; issues: RawIssue[] } {
  const structural = structuralIssues(doc);
  const parsed = runbookDocumentSchema.safeParse(doc);
  if (!parsed.success) {
    // A nested phase or rollback also shows up as an unknown field; report it once, with the clearer message.
    const known = new Set(structural.map((i) => formatPath(i.path)));
    const fieldIssues = rawIssuesFromZod(parsed.error).filter(
      (i) => !known.has(formatPath(i.path)) && !known.has(formatPath(i.path.slice(0, -1))),
    );
    return { ok: false, issues: [...structural, ...fieldIssues] };
  }
  const { steps, phases, validation_mode, ...rest } = parsed.data;
  if ((steps === undefined) === (phases === undefined)) {
    return {
      ok: false,
      issues: [...structural, { path: [], message: "give either 'steps' or 'phases', not both and not neither" }],
    };
  }
  const normalPhases: Phase[] = phases ?? [{ id: 'main', mode: 'barrier', steps: steps ?? [] }];
  const runbook: Runbook = {
    ...rest,
    validation_mode:
      validation_mode ??
      defaultValidationMode(
        rest.environment,
        normalPhases.flatMap((p) => p.steps),
      ),
    phases: normalPhases,
  };
  // Paths name the document as written: a `steps` shorthand is reported as `steps[i]`, not `phases[0].steps[i]`.
  const asWritten = (issue: RawIssue): RawIssue =>
    steps !== undefined && issue.path[0] === 'phases' && issue.path[1] === 0 && issue.path[2] === 'steps'
      ? { ...issue, path: issue.path.slice(2) }
      : issue;
  const bytes = Buffer.byteLength(canonicalJson(runbook), 'utf8');
  if (bytes > MAX_RUNBOOK_BYTES) {
    return {
      ok: false,
      issues: [
        ...structural,
        {
          path: [steps === undefined ? 'phases' : 'steps'],
          message: `the runbook is ${bytes} bytes in its normal form; at most ${MAX_RUNBOOK_BYTES} are allowed`,
        },
      ],
    };
  }
  const issues = [...structural, ...semanticIssues(runbook).map(asWritten)];
  return issues.length > 0 ? { ok: false, issues } : { ok: true, runbook };
}

/** Like {@link validateRunbook}, but throws a {@link ValidationError} listing every issue. */
export function parseRunbookObject(doc: unknown): Runbook {
  const result = validateRunbook(doc);
  if (!result.ok) throw new ValidationError('the runbook is not valid', formatIssues(result.issues));
  return result.runbook;
}

/** sha256 of the runbook's canonical normal form: equal content, equal digest, whatever the format. */
export function runbookDigest(runbook: Runbook): string {
  return `sha256:${sha256Hex(canonicalJson(runbook))}`;
}

/**
 * Resolves a run's inputs against the runbook's declarations: unknown names, wrong types,
 * values outside `enum` and missing required inputs are issues at `inputs.<name>`.
 */
export function resolveInputs(
  runbook: Pick<Runbook, 'inputs'>,
  given: Readonly<Record<string, Json>>,
): Record<string, Json> {
  const issues: RawIssue[] = [];
  const resolved: Record<string, Json> = {};
  for (const name of Object.keys(given)) {
    if (!Object.hasOwn(runbook.inputs, name))
      issues.push({ path: ['inputs', name], message: `the runbook declares no input '${name}'` });
  }
  for (const [name, spec] of Object.entries(runbook.inputs)) {
    const value = Object.hasOwn(given, name) ? given[name] : spec.default;
    if (value === undefined) {
      if (spec.required !== false) issues.push({ path: ['inputs', name], message: `input '${name}' is required` });
      continue;
    }
    if (!inputTypeMatches(spec.type, value)) {
      issues.push({ path: ['inputs', name], message: `must be a ${spec.type}` });
      continue;
    }
    if (spec.enum && !spec.enum.some((allowed) => allowed === value)) {
      issues.push({
        path: ['inputs', name],
        message: `must be one of ${spec.enum.map((v) => JSON.stringify(v)).join(', ')}`,
      });
      continue;
    }
    resolved[name] = value;
  }
  if (issues.length > 0) throw new ValidationError('the run inputs are not valid', formatIssues(issues));
  return resolved;
}
