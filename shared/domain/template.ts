import type { Json } from './canonical.js';
import type { PathSegment, RawIssue } from './zod-issues.js';

const PLACEHOLDER = /\{\{\s*(.*?)\s*\}\}/g;
const WHOLE = /^\{\{\s*(.*?)\s*\}\}$/;
const INPUT_REF = /^inputs\.([A-Za-z_][A-Za-z0-9_]*)$/;

/** Every `{{ ... }}` placeholder in a params tree, with where it stands and the input it names. */
export function findPlaceholders(
  value: unknown,
  path: readonly PathSegment[] = [],
): Array<{ path: PathSegment[]; expression: string; input?: string }> {
  if (typeof value === 'string') {
    return [...value.matchAll(PLACEHOLDER)].map((m) => {
      const expression = m[1] ?? '';
      const input = INPUT_REF.exec(expression)?.[1];
      return input === undefined ? { path: [...path], expression } : { path: [...path], expression, input };
    });
  }
  if (Array.isArray(value)) return value.flatMap((item, i) => findPlaceholders(item, [...path, i]));
  if (value !== null && typeof value === 'object') {
    return Object.entries(value).flatMap(([k, v]) => findPlaceholders(v, [...path, k]));
  }
  return [];
}

/** Issues for placeholders that are not `{{ inputs.<declared name> }}`. */
export function checkPlaceholders(
  value: unknown,
  declared: ReadonlySet<string>,
  path: readonly PathSegment[],
): RawIssue[] {
  return findPlaceholders(value, path).flatMap((p): RawIssue[] => {
    if (p.input === undefined) {
      return [
        {
          path: p.path,
          message: `'{{ ${p.expression} }}' is not a placeholder: only {{ inputs.<name> }} is allowed`,
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
export function substitute(value: Json, inputs: Readonly<Record<string, Json>>): Json {
  if (typeof value === 'string') {
    const whole = WHOLE.exec(value);
    const wholeRef = whole ? INPUT_REF.exec(whole[1] ?? '') : null;
    if (wholeRef?.[1] !== undefined && !value.slice(2, -2).includes('{{')) return lookup(inputs, wholeRef[1]);
    return value.replace(PLACEHOLDER, (_match, expression: string) => {
      const name = INPUT_REF.exec(expression)?.[1];
      if (name === undefined) throw new TypeError(`'{{ ${expression} }}' is not a placeholder`);
      const resolved = lookup(inputs, name);
      if (resolved !== null && typeof resolved === 'object') {
        throw new TypeError(`input '${name}' is a list or an object and cannot be placed inside text`);
      }
      return String(resolved);
    });
  }
  if (Array.isArray(value)) return value.map((item) => substitute(item, inputs));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, substitute(v, inputs)]));
  }
  return value;
}

function lookup(inputs: Readonly<Record<string, Json>>, name: string): Json {
  if (!Object.hasOwn(inputs, name)) throw new TypeError(`input '${name}' has no value`);
  return inputs[name] as Json;
}
