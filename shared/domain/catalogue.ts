import { z } from 'zod';
import { durationSchema } from './duration.js';
import { type PathSegment, type RawIssue, rawIssuesFromZod } from './zod-issues.js';

/** What an action does to the world, declared once and used by policy, retries and recovery. */
export interface ActionTraits {
  /** Running it twice has the same effect as once, so a lost attempt may simply run again. */
  readonly safeToRetry: boolean;
  /** Its effect can be undone; `inverse` names the action that undoes it, when there is one. */
  readonly reversible: boolean;
  readonly inverse?: string;
  /** It removes or replaces something (policy asks for more approvers). */
  readonly destructive: boolean;
}

/** One action of a backend: its typed parameters and its traits. */
export interface ActionSpec extends ActionTraits {
  readonly description: string;
  readonly params: z.ZodType;
}

/** A backend: a closed set of actions (seed 003, "commands, not shells"). */
export interface BackendSpec {
  readonly description: string;
  readonly actions: Readonly<Record<string, ActionSpec>>;
}

const url = z.url({ protocol: /^https?$/, error: 'must be an http or https URL' });
const scriptName = z
  .string()
  .regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, 'must name a script in the catalogue (lower-case letters, digits, . _ -)');
const httpCommon = {
  url,
  headers: z.record(z.string(), z.string()).optional(),
  expect_status: z.number().int().min(100).max(599).default(200),
  /** JSON pointer-like dotted paths that must equal the given values in the response body. */
  expect_json: z.record(z.string(), z.union([z.string(), z.number(), z.boolean(), z.null()])).optional(),
  timeout: durationSchema.optional(),
  max_response_bytes: z.number().int().positive().max(10_485_760).default(1_048_576),
};

const action = (spec: ActionSpec): ActionSpec => spec;

/** The params of the actions the worker's backends implement, shared by the API and the worker. */
export const httpGetParams = z.strictObject(httpCommon);
export const httpPostParams = z.strictObject({ ...httpCommon, body: z.json().optional() });
export const httpRequestParams = z.strictObject({
  ...httpCommon,
  method: z.enum(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE']),
  body: z.json().optional(),
});
export const scriptRunParams = z.strictObject({
  script: scriptName,
  args: z.array(z.string().max(4096)).max(64).default([]),
});
export const ecsForceNewDeploymentParams = z.strictObject({ cluster: z.string().min(1), service: z.string().min(1) });
export const ssmSendCommandParams = z.strictObject({
  document_name: z.string().min(1),
  instance_ids: z
    .array(z.string().regex(/^(i|mi)-[0-9a-f]{8,17}$/, 'must be an instance id'))
    .min(1)
    .max(50),
  parameters: z.record(z.string(), z.array(z.string())).default({}),
});
export const lambdaInvokeParams = z.strictObject({ function_name: z.string().min(1), payload: z.json().optional() });
export const rotateSecretParams = z.strictObject({ secret_id: z.string().min(1) });
export const notifyPostParams = z.strictObject({
  webhook_secret: z.string().min(1),
  text: z.string().min(1).max(4000),
});

/** Every backend Capstan knows. The API validates runbooks against it; the worker implements it. */
export const CATALOGUE: Readonly<Record<string, BackendSpec>> = {
  test: {
    description: 'Built-in actions for demos and tests',
    actions: {
      echo: action({
        description: 'Writes the message to the step output',
        params: z.strictObject({ message: z.string() }),
        safeToRetry: true,
        reversible: false,
        destructive: false,
      }),
      sleep: action({
        description: 'Waits for the given number of milliseconds',
        // A node attribute (`{{ target.attributes.ms }}`) arrives as digits.
        params: z.strictObject({
          ms: z.preprocess(
            (v) => (typeof v === 'string' && /^[0-9]{1,8}$/.test(v) ? Number(v) : v),
            z.number().int().min(0).max(86_400_000),
          ),
        }),
        safeToRetry: true,
        reversible: false,
        destructive: false,
      }),
      fail: action({
        description:
          "Fails with the message; retryable unless told otherwise; with `when: 'false'` it succeeds instead",
        params: z.strictObject({
          message: z.string(),
          retryable: z.boolean().default(true),
          when: z.enum(['true', 'false']).default('true'),
        }),
        safeToRetry: true,
        reversible: false,
        destructive: false,
      }),
      flaky: action({
        description: 'Fails the first fail_times attempts, then succeeds',
        params: z.strictObject({ fail_times: z.number().int().min(0).max(100) }),
        safeToRetry: true,
        reversible: false,
        destructive: false,
      }),
      artifact: action({
        description: 'Stores the content as a named artifact of the run',
        params: z.strictObject({ name: z.string().min(1).max(100), content: z.string().max(1_048_576) }),
        safeToRetry: true,
        reversible: false,
        destructive: false,
      }),
      counter: action({
        description: 'Adds one to a named counter, a side effect that shows when it runs twice',
        params: z.strictObject({ key: z.string().min(1).max(200) }),
        safeToRetry: false,
        reversible: false,
        destructive: false,
      }),
    },
  },
  http: {
    description: 'HTTP requests with expected status and JSON checks',
    actions: {
      get: action({
        description: 'GET a URL and check the answer',
        params: httpGetParams,
        safeToRetry: true,
        reversible: false,
        destructive: false,
      }),
      post: action({
        description: 'POST a JSON body and check the answer',
        params: httpPostParams,
        safeToRetry: false,
        reversible: false,
        destructive: false,
      }),
      request: action({
        description: 'Any method, with an optional JSON body',
        params: httpRequestParams,
        safeToRetry: false,
        reversible: false,
        destructive: true,
      }),
    },
  },
  script: {
    description: 'Named scripts from the allow-listed catalogue shipped in the worker image; argv only, no shell',
    actions: {
      run: action({
        description: 'Runs a catalogue script with an argument vector',
        params: scriptRunParams,
        safeToRetry: false,
        reversible: false,
        destructive: true,
      }),
    },
  },
  aws: {
    description: 'A closed set of AWS API actions',
    actions: {
      'ecs.forceNewDeployment': action({
        description: 'Redeploys an ECS service with its current task definition',
        params: ecsForceNewDeploymentParams,
        safeToRetry: true,
        reversible: false,
        destructive: false,
      }),
      'ssm.sendCommand': action({
        description: 'Runs an SSM document on instances',
        params: ssmSendCommandParams,
        safeToRetry: false,
        reversible: false,
        destructive: true,
      }),
      'lambda.invoke': action({
        description: 'Invokes a Lambda function synchronously',
        params: lambdaInvokeParams,
        safeToRetry: false,
        reversible: false,
        destructive: false,
      }),
      'secretsmanager.rotateSecret': action({
        description: 'Starts rotation of a Secrets Manager secret',
        params: rotateSecretParams,
        safeToRetry: false,
        reversible: false,
        destructive: true,
      }),
    },
  },
  notify: {
    description: 'Messages to a Slack-compatible incoming webhook',
    actions: {
      post: action({
        description: 'Posts a text message to the webhook whose URL is held in a secret',
        params: notifyPostParams,
        safeToRetry: false,
        reversible: false,
        destructive: false,
      }),
    },
  },
};

/** The spec of `backend.action`, or undefined when the catalogue has no such action. */
export function findAction(backend: string, actionName: string): ActionSpec | undefined {
  const spec = CATALOGUE[backend];
  return spec && Object.hasOwn(spec.actions, actionName) ? spec.actions[actionName] : undefined;
}

export type ParamsCheck = { ok: true; params: Record<string, unknown> } | { ok: false; issues: RawIssue[] };

/** Checks a step's backend, action and params against the catalogue; issue paths start at `path`. */
export function checkAction(
  backend: string,
  actionName: string,
  params: unknown,
  path: readonly PathSegment[],
): ParamsCheck {
  const backendSpec = CATALOGUE[backend];
  if (!backendSpec) {
    return {
      ok: false,
      issues: [
        {
          path: [...path, 'backend'],
          message: `unknown backend '${backend}' (known: ${Object.keys(CATALOGUE).join(', ')})`,
        },
      ],
    };
  }
  const spec = findAction(backend, actionName);
  if (!spec) {
    return {
      ok: false,
      issues: [
        {
          path: [...path, 'action'],
          message: `backend '${backend}' has no action '${actionName}' (known: ${Object.keys(backendSpec.actions).join(', ')})`,
        },
      ],
    };
  }
  const parsed = spec.params.safeParse(params ?? {});
  if (!parsed.success) return { ok: false, issues: rawIssuesFromZod(parsed.error, [...path, 'params']) };
  return { ok: true, params: parsed.data as Record<string, unknown> };
}
