import { z } from 'zod';

export const ENVIRONMENTS = ['dev', 'staging', 'prod'] as const;
export const environmentSchema = z.enum(ENVIRONMENTS);
export type Environment = z.infer<typeof environmentSchema>;

export const SANDBOX_PROFILE_NAMES = ['prod-critical', 'prod-standard', 'staging-standard', 'dev-flex'] as const;
export const sandboxProfileNameSchema = z.enum(SANDBOX_PROFILE_NAMES);
export type SandboxProfileName = z.infer<typeof sandboxProfileNameSchema>;

/** `backend.action`, or `backend.*` for every action of a backend. */
export type ActionPattern = `${string}.${string}`;

/**
 * A sandbox profile (seed 000 section 5.1): where its steps may run, what they may do,
 * and the container settings its workers get. The CDK stack, the local stack, the
 * dispatcher and the worker all read this one table.
 */
export interface SandboxProfile {
  readonly name: SandboxProfileName;
  readonly environment: Environment;
  /** `allow`: only listed actions run. `deny`: everything but the listed actions runs. */
  readonly commandScope:
    | { readonly mode: 'allow'; readonly actions: readonly ActionPattern[] }
    | { readonly mode: 'deny'; readonly actions: readonly ActionPattern[] };
  /** Every side-effecting step must declare a rollback. */
  readonly rollbackRequired: boolean;
  readonly container: {
    readonly cpu: 256 | 512 | 1024 | 2048;
    readonly memoryMiB: number;
    readonly readOnlyRootFilesystem: boolean;
    /** `none`: only the AWS endpoints the worker needs (through VPC endpoints); `https`: outbound 443 anywhere. */
    readonly egress: 'none' | 'https';
    readonly desiredCount: number;
  };
  /** Seconds a worker has to finish its current step after SIGTERM; ECS's stop timeout matches. */
  readonly stopTimeoutSeconds: number;
  /** Visibility timeout of the profile queue; the DB lease is the authority, this only bounds redelivery. */
  readonly queueVisibilitySeconds: number;
  /** Receives after which a message goes to the DLQ. */
  readonly maxReceiveCount: number;
}

const TEST_AND_READ_ONLY: readonly ActionPattern[] = ['test.*', 'http.get', 'notify.post'];

export const SANDBOX_PROFILES: Readonly<Record<SandboxProfileName, SandboxProfile>> = {
  'prod-critical': {
    name: 'prod-critical',
    environment: 'prod',
    commandScope: {
      mode: 'allow',
      actions: [...TEST_AND_READ_ONLY, 'aws.ecs.forceNewDeployment', 'aws.secretsmanager.rotateSecret'],
    },
    rollbackRequired: true,
    container: { cpu: 512, memoryMiB: 1024, readOnlyRootFilesystem: true, egress: 'none', desiredCount: 2 },
    stopTimeoutSeconds: 120,
    queueVisibilitySeconds: 120,
    maxReceiveCount: 5,
  },
  'prod-standard': {
    name: 'prod-standard',
    environment: 'prod',
    commandScope: {
      mode: 'allow',
      actions: [...TEST_AND_READ_ONLY, 'http.post', 'script.run', 'aws.*'],
    },
    rollbackRequired: true,
    container: { cpu: 512, memoryMiB: 1024, readOnlyRootFilesystem: true, egress: 'https', desiredCount: 2 },
    stopTimeoutSeconds: 120,
    queueVisibilitySeconds: 120,
    maxReceiveCount: 5,
  },
  'staging-standard': {
    name: 'staging-standard',
    environment: 'staging',
    commandScope: { mode: 'allow', actions: [...TEST_AND_READ_ONLY, 'http.*', 'script.run', 'aws.*'] },
    rollbackRequired: false,
    container: { cpu: 256, memoryMiB: 512, readOnlyRootFilesystem: true, egress: 'https', desiredCount: 1 },
    stopTimeoutSeconds: 60,
    queueVisibilitySeconds: 60,
    maxReceiveCount: 5,
  },
  'dev-flex': {
    name: 'dev-flex',
    environment: 'dev',
    commandScope: { mode: 'deny', actions: ['aws.secretsmanager.rotateSecret'] },
    rollbackRequired: false,
    container: { cpu: 256, memoryMiB: 512, readOnlyRootFilesystem: false, egress: 'https', desiredCount: 1 },
    stopTimeoutSeconds: 60,
    queueVisibilitySeconds: 60,
    maxReceiveCount: 5,
  },
};

function matches(pattern: ActionPattern, backend: string, action: string): boolean {
  const dot = pattern.indexOf('.');
  const patternBackend = pattern.slice(0, dot);
  const patternAction = pattern.slice(dot + 1);
  return patternBackend === backend && (patternAction === '*' || patternAction === action);
}

/** True when the profile lets `backend.action` run (allow-list or deny-list, seed 000 section 5.1). */
export function profileAllows(profile: SandboxProfile, backend: string, action: string): boolean {
  const listed = profile.commandScope.actions.some((pattern) => matches(pattern, backend, action));
  return profile.commandScope.mode === 'allow' ? listed : !listed;
}
