import { parse as parseYaml } from 'yaml';
import type { Json } from '../shared/domain/canonical.js';
import type { InputSpec } from '../shared/domain/runbook.js';
import { UsageError } from './errors.js';

/** `key=value` into its parts; the value may contain `=`. */
export function splitAssignment(text: string): [string, string] {
  const at = text.indexOf('=');
  if (at <= 0) throw new UsageError(`--input '${text}' is not key=value`, 'write --input name=value, once per input');
  return [text.slice(0, at), text.slice(at + 1)];
}

/**
 * A command-line value as the runbook's input type wants it: `--input replicas=3` is the number 3
 * when `replicas` is a number, and the string "3" when it is a string. Lists and objects are JSON.
 * An input the runbook does not declare goes as a string, and the API names it.
 */
export function coerceInput(name: string, text: string, spec: Pick<InputSpec, 'type'> | undefined): Json {
  const bad = (what: string): never => {
    throw new UsageError(`--input ${name}=${text}: ${what}`, `give ${name} as ${spec?.type ?? 'a string'}`);
  };
  switch (spec?.type) {
    case undefined:
    case 'string':
      return text;
    case 'number': {
      const value = Number(text);
      return text.trim() === '' || !Number.isFinite(value) ? bad('not a number') : value;
    }
    case 'boolean':
      return text === 'true' ? true : text === 'false' ? false : bad('not true or false');
    case 'list':
    case 'object': {
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch {
        return bad('not JSON');
      }
      const isList = Array.isArray(value);
      if (spec.type === 'list' ? !isList : isList || value === null || typeof value !== 'object')
        return bad(`not a JSON ${spec.type === 'list' ? 'array' : 'object'}`);
      return value as Json;
    }
  }
}

/** An `--input-file`: a JSON or YAML object of input values. */
export function parseInputFile(path: string, text: string): Record<string, Json> {
  let value: unknown;
  try {
    value = parseYaml(text);
  } catch (error) {
    throw new UsageError(`${path} is not JSON or YAML: ${(error as Error).message.split('\n')[0]}`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw new UsageError(`${path} must hold an object of input values`, 'write it as {"name": value, ...}');
  return value as Record<string, Json>;
}

/** The run's inputs: the file's, then each `--input` over them, typed by the runbook's declarations. */
export function buildInputs(
  assignments: readonly string[],
  fromFile: Record<string, Json>,
  declared: Readonly<Record<string, Pick<InputSpec, 'type'>>>,
): Record<string, Json> {
  const inputs: Record<string, Json> = { ...fromFile };
  for (const assignment of assignments) {
    const [name, text] = splitAssignment(assignment);
    inputs[name] = coerceInput(name, text, declared[name]);
  }
  return inputs;
}
