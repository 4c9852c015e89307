import fc from 'fast-check';
import { stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { createRunBodySchema } from '../../../shared/app/runs.js';
import { canonicalJson, type Json } from '../../../shared/domain/canonical.js';
import {
  chainEvents,
  EMPTY_CHAIN,
  type EventDraft,
  type RunEvent,
  verifyChain,
} from '../../../shared/domain/events.js';
import { ValidationError } from '../../../shared/domain/errors.js';
import { parseRunbookSource } from '../../../shared/domain/runbook-source.js';
import { runbookDigest, validateRunbook } from '../../../shared/domain/runbook.js';
import { MAX_JSON_DEPTH, storableJsonIssues, uncarriableCharacter } from '../../../shared/domain/storable.js';
import { substitute } from '../../../shared/domain/template.js';

const id = fc.stringMatching(/^[a-z][a-z0-9_-]{0,10}$/);

/** Valid runbooks: test-backend steps whose params come from declared string inputs. */
const runbook = fc
  .record({
    name: id,
    inputs: fc.uniqueArray(fc.stringMatching(/^[a-z][a-z0-9_]{0,8}$/), { minLength: 1, maxLength: 3 }),
    steps: fc.uniqueArray(id, { minLength: 1, maxLength: 4 }),
    message: fc.string({ maxLength: 30 }).filter((s) => !/[{}]/.test(s) && uncarriableCharacter(s) === undefined),
    strategy: fc.constantFrom('fail-fast', 'continue'),
  })
  .map((r) => ({
    name: r.name,
    environment: 'dev',
    sandbox_profile: 'dev-flex',
    strategy: r.strategy,
    inputs: Object.fromEntries(r.inputs.map((name) => [name, { type: 'string', default: 'x' }])),
    steps: r.steps.map((stepId, i) => ({
      id: stepId,
      backend: 'test',
      action: 'echo',
      params: { message: i === 0 ? `${r.message}{{ inputs.${r.inputs[0]} }}` : r.message },
    })),
  }));

describe('the runbook parser', () => {
  it('never throws on arbitrary text: it returns a runbook or a ValidationError', () => {
    fc.assert(
      fc.property(
        fc.string({ maxLength: 300 }),
        fc.constantFrom('yaml', 'json') as fc.Arbitrary<'yaml' | 'json'>,
        (text, format) => {
          try {
            parseRunbookSource(text, format);
          } catch (error) {
            expect(error).toBeInstanceOf(ValidationError);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('never throws on arbitrary values, only returns issues', () => {
    fc.assert(
      fc.property(fc.anything({ maxDepth: 4 }), (value) => {
        const result = validateRunbook(value);
        if (!result.ok) expect(result.issues.length).toBeGreaterThan(0);
      }),
      { numRuns: 300 },
    );
  });

  it('gives a runbook the same digest whether it is written as YAML or JSON', () => {
    fc.assert(
      fc.property(runbook, (doc) => {
        const fromYaml = parseRunbookSource(stringify(doc), 'yaml');
        const fromJson = parseRunbookSource(JSON.stringify(doc), 'json');
        expect(runbookDigest(fromYaml)).toBe(runbookDigest(fromJson));
        expect(runbookDigest(parseRunbookSource(JSON.stringify(fromYaml), 'json'))).toBe(runbookDigest(fromYaml));
      }),
      { numRuns: 100 },
    );
  });
});

describe('template substitution', () => {
  it('places any input value verbatim and evaluates nothing', () => {
    // Text around a placeholder has no braces of its own: '{' before '{{' would make another placeholder.
    const text = fc.string({ maxLength: 40 });
    const around = text.filter((s) => !/[{}]/.test(s));
    fc.assert(
      fc.property(around, text, fc.jsonValue({ maxDepth: 3 }), (before, value, whole) => {
        const inputs = { a: value, b: whole as Json };
        expect(substitute(`${before}{{ inputs.a }}`, inputs)).toBe(`${before}${value}`);
        expect(substitute('{{ inputs.b }}', inputs)).toEqual(whole);
        expect(substitute({ list: ['{{ inputs.a }}'] }, inputs)).toEqual({ list: [value] });
      }),
      { numRuns: 300 },
    );
  });

  it('leaves placeholder-looking text inside a value alone', () => {
    const inputs = { a: '{{ inputs.b }} $(rm -rf /) `id`', b: 'never' };
    expect(substitute('x {{ inputs.a }}', inputs)).toBe('x {{ inputs.b }} $(rm -rf /) `id`');
  });
});

describe('canonical JSON and the hash chain', () => {
  it('does not depend on key order', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 2 })), (object) => {
        const reversed = Object.fromEntries(Object.entries(object).reverse());
        expect(canonicalJson(reversed)).toBe(canonicalJson(object));
      }),
      { numRuns: 300 },
    );
  });

  const drafts = fc.array(
    fc.record({
      type: fc.constantFrom('run.created', 'step.output', 'step.succeeded') as fc.Arbitrary<EventDraft['type']>,
      payload: fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 })) as fc.Arbitrary<
        Record<string, Json>
      >,
    }),
    { minLength: 1, maxLength: 8 },
  );
  const build = (list: ReadonlyArray<{ type: EventDraft['type']; payload: Record<string, Json> }>) =>
    chainEvents(
      EMPTY_CHAIN,
      { runId: 'run-1', tenantId: 't' },
      list.map((d, i) => ({ ...d, eventId: `e${i}`, timestamp: '2024-01-01T00:00:00.000Z', meta: {} })),
    ).events;

  it('accepts every chain it builds', () => {
    fc.assert(
      fc.property(drafts, (list) => {
        expect(verifyChain(build(list))).toMatchObject({ valid: true, count: list.length });
      }),
    );
  });

  it('rejects any single mutation of a built chain', () => {
    const mutation = fc.record({ at: fc.nat(), kind: fc.constantFrom('payload', 'seq', 'prevHash', 'type', 'drop') });
    fc.assert(
      fc.property(drafts, mutation, (list, m) => {
        const events: RunEvent[] = build(list);
        const at = m.at % events.length;
        const event = events[at] as RunEvent;
        const changed: RunEvent[] = [...events];
        if (m.kind === 'drop') {
          if (events.length < 2 || at === events.length - 1) return; // dropping the tail leaves a valid prefix
          changed.splice(at, 1);
        } else if (m.kind === 'payload') changed[at] = { ...event, payload: { ...event.payload, injected: true } };
        else if (m.kind === 'seq') changed[at] = { ...event, seq: event.seq + 1 };
        else if (m.kind === 'prevHash') changed[at] = { ...event, prevHash: event.hash };
        else changed[at] = { ...event, type: event.type === 'run.created' ? 'run.failed' : 'run.created' };
        expect(verifyChain(changed).valid).toBe(false);
      }),
    );
  });
});

/** What DynamoDB and SQS accept, checked independently of the validator under test. */
function storableByTheServices(value: unknown, depth = 0): boolean {
  if (value === null || typeof value === 'boolean') return true;
  if (typeof value === 'number') {
    if (Number.isInteger(value)) return Number.isSafeInteger(value);
    const m = Math.abs(value);
    return m >= 1e-130 && m <= 9.99e125;
  }
  if (typeof value === 'string')
    // eslint-disable-next-line no-control-regex -- SQS refuses exactly these control characters
    return value.isWellFormed() && !/[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]/.test(value);
  if (depth >= MAX_JSON_DEPTH) return false;
  if (Array.isArray(value)) return value.every((v) => storableByTheServices(v, depth + 1));
  return Object.entries(value as object).every(
    ([k, v]) => k !== '' && k !== '__proto__' && storableByTheServices(k) && storableByTheServices(v, depth + 1),
  );
}

describe('the create-run schema', () => {
  it('accepts only inputs that DynamoDB can store and SQS can carry', () => {
    const hostileString = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 10 }),
      fc.constantFrom('\uFFFE', '\uD800', '\u0000', ''),
    );
    const hostileNumber = fc.oneof(fc.double(), fc.constantFrom(2 ** 53 + 2, 1e308, 5e-324, -0, 1e-130, 9.99e125));
    const value = fc.letrec((tie) => ({
      node: fc.oneof(
        { depthSize: 'small' },
        hostileString,
        hostileNumber,
        fc.boolean(),
        fc.constant(null),
        fc.array(tie('node'), { maxLength: 3 }),
        fc.dictionary(fc.oneof(hostileString, fc.constant('__proto__')), tie('node'), { maxKeys: 3 }),
      ),
    })).node;
    fc.assert(
      fc.property(fc.dictionary(fc.string({ maxLength: 6 }), value, { maxKeys: 3 }), (inputs) => {
        const parsed = createRunBodySchema.safeParse({ runbookId: 'r', inputs });
        if (parsed.success) expect(storableByTheServices(parsed.data.inputs)).toBe(true);
        expect(storableJsonIssues(inputs).length === 0).toBe(storableByTheServices(inputs));
      }),
      { numRuns: 500 },
    );
  });

  it('refuses a value nested thousands of levels deep without overflowing the stack', () => {
    let value: Json = 1;
    for (let i = 0; i < 100_000; i++) value = [value];
    expect(storableJsonIssues(value)).toEqual([expect.objectContaining({ message: expect.stringMatching(/deeper/) })]);
  });
});
