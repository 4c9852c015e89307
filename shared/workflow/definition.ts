import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** Path of the run interpreter's ASL; the CDK stack and the local stack load this one file. */
export const RUN_INTERPRETER_ASL_PATH = fileURLToPath(new URL('./run-interpreter.asl.json', import.meta.url));

/** The `${Name}` placeholders the definition expects, each bound to a Lambda function. */
export const DEFINITION_FUNCTIONS = {
  PlanFunctionArn: 'plan',
  DispatchFunctionArn: 'dispatch',
  AwaitApprovalFunctionArn: 'await-approval',
  AwaitResumeFunctionArn: 'await-resume',
} as const;

export type DefinitionPlaceholder = keyof typeof DEFINITION_FUNCTIONS;

/** The definition text with its placeholders still in place. */
export function loadRunInterpreterDefinition(): string {
  return readFileSync(RUN_INTERPRETER_ASL_PATH, 'utf8');
}

/** Replaces each `${Placeholder}` with the value given for it; a missing value is an error. */
export function substituteDefinition(text: string, values: Readonly<Record<DefinitionPlaceholder, string>>): string {
  return text.replace(/\$\{([A-Za-z]+)\}/g, (match, name: string) => {
    if (!Object.hasOwn(values, name)) throw new Error(`no value for ${match} in the run interpreter definition`);
    return values[name as DefinitionPlaceholder];
  });
}
