import type { Json } from './canonical.js';
import type { PathSegment, RawIssue } from './zod-issues.js';

const PLACEHOLDER = /\{\{\s*(.*?)\s*\}\}/g;
const WHOLE = /^\{\{\s*(.*?)\s*\}\}$/;
const INPUT_REF = /^inputs\.([A-Za-z_][A-Za-z0-9_]*)$/;
/** `target.id` or `target.attributes.<key>`: the node a fan-out step's execution acts on. */
const TARGET_REF = /^target\.(id|attributes\.([A-Za-z_][A-Za-z0-9_]*))$/;

/** What placeholders may name: the run's inputs and, for a step with a target, the node's id and attributes. */
export interface TemplateScope {
  readonly inputs: Readonly<Record<string, Json>>;
  readonly target?: { readonly id: string; readonly attributes: Readonly<Record<string, string>> };
}

/** Every `{{ ... }}` placeholder in a params tree, with where it stands and the input it names. */
export function findPlaceholders(
  value: unknown,
  path: readonly PathSegment[] = [],
): Array<{ path: PathSegment[]; expression: string; input?: string; target?: true }> {
  if (typeof value === 'string') {
    return [...value.matchAll(PLACEHOLDER)].map((m) => {
      const expression = m[1] ?? '';
      const input = INPUT_REF.exec(expression)?.[1];
      if (TARGET_REF.test(expression)) return { path: [...path], expression, target: true as const };
      return input === undefined ? { path: [...path], expression } : { path: [...path], expression, input };
    });
  }
  if (Array.isArray(value)) return value.flatMap((item, i) => findPlaceholders(item, [...path, i]));
  if (value !== null && typeof value === 'object') {
    return Object.entries(value).flatMap(([k, v]) => findPlaceholders(v, [...path, k]));
  }
  return [];
}

/**
 * Issues for placeholders that are not `{{ inputs.<declared name> }}`, or (in a step with a
 * target) `{{ target.id }}` and `{{ target.attributes.<key> }}`.
 */
export function checkPlaceholders(
  value: unknown,
  declared: ReadonlySet<string>,
  path: readonly PathSegment[],
  hasTarget = false,
): RawIssue[] {
  return findPlaceholders(value, path).flatMap((p): RawIssue[] => {
    if (p.target) {
      return hasTarget ? [] : [{ path: p.path, message: `'{{ ${p.expression} }}' needs a target: this step has none` }];
    }
    if (p.input === undefined) {
      return [
        {
          path: p.path,
          message: hasTarget
            ? `'{{ ${p.expression} }}' is not a placeholder: only {{ inputs.<name> }}, {{ target.id }} and {{ target.attributes.<key> }} are allowed`
            : `'{{ ${p.expression} }}' is not a placeholder: only {{ inputs.<name> }} is allowed`,
        },
      ];
    }
    if (!declared.has(p.input)) return [{ path: p.path, message: `input '${p.input}' is not declared in inputs` }];
    return [];
  });
}

/**
 * Replaces `{{ inputs.x }}` with data. A string that is one placeholder becomes the input's
 * value with its type (a number stays a number); a placeholder inside a longer string becomes
 * text. Nothing is evaluated: the result is data, never code or shell.
 */
export function substitute(
  value: Json,
  inputs: Readonly<Record<string, Json>>,
  target?: TemplateScope['target'],
): Json {
  return substituteIn(value, target ? { inputs, target } : { inputs });
}

function resolve(scope: TemplateScope, expression: string): Json {
  const target = TARGET_REF.exec(expression);
  if (target) {
    if (!scope.target) throw new TypeError(`'{{ ${expression} }}' needs a target: this step has none`);
    if (target[1] === 'id') return scope.target.id;
    const key = target[2] ?? '';
    if (!Object.hasOwn(scope.target.attributes, key))
      throw new TypeError(`node '${scope.target.id}' has no attribute '${key}'`);
    return scope.target.attributes[key] ?? '';
  }
  const name = INPUT_REF.exec(expression)?.[1];
  if (name === undefined) throw new TypeError(`'{{ ${expression} }}' is not a placeholder`);
  return lookup(scope.inputs, name);
}

function substituteIn(value: Json, scope: TemplateScope): Json {
  if (typeof value === 'string') {
    const whole = WHOLE.exec(value);
    if (whole && !value.slice(2, -2).includes('{{')) return resolve(scope, whole[1] ?? '');
    return value.replace(PLACEHOLDER, (_match, expression: string) => {
      const resolved = resolve(scope, expression);
      if (resolved !== null && typeof resolved === 'object') {
        throw new TypeError(`'{{ ${expression} }}' is a list or an object and cannot be placed inside text`);
      }
      return String(resolved);
    });
  }
  if (Array.isArray(value)) return value.map((item) => substituteIn(item, scope));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, substituteIn(v, scope)]));
  }
  return value;
}

function lookup(inputs: Readonly<Record<string, Json>>, name: string): Json {
  if (!Object.hasOwn(inputs, name)) throw new TypeError(`input '${name}' has no value`);
  return inputs[name] as Json;
}
