/** A step command as a worker received it, before it is parsed. */
export interface ReceivedCommand {
  /** The transport's id for it, for logs. */
  readonly id: string;
  readonly body: string;
  /** What `delete` and `release` need to address this delivery. */
  readonly handle: string;
  /** The sender's trace header, so the worker's spans continue the dispatcher's trace. */
  readonly traceHeader?: string;
}

/**
 * Where a worker's step commands come from (a profile's step queue). Delivery is at least once
 * and only advisory: the step execution's lease decides who runs it.
 */
export interface CommandSource {
  /** Waits a while for at most `max` commands (one when not given); an empty list when none came. */
  receive(max?: number): Promise<ReceivedCommand[]>;
  /** The command was handled (or is a duplicate): it is not delivered again. */
  delete(command: ReceivedCommand): Promise<void>;
  /** Hands the command back at once, for another worker (this one is draining). */
  release(command: ReceivedCommand): Promise<void>;
}

/**
 * The AWS calls behind the `aws` backend's actions, one per action. Each rejects with the
 * service's error (its `name` is the service's error code), or with the signal's reason.
 */
export interface AwsActions {
  forceNewDeployment(
    input: { readonly cluster: string; readonly service: string },
    signal: AbortSignal,
  ): Promise<{ readonly deploymentId?: string }>;
  sendCommand(
    input: {
      readonly documentName: string;
      readonly instanceIds: readonly string[];
      readonly parameters?: Record<string, string[]>;
    },
    signal: AbortSignal,
  ): Promise<{ readonly commandId?: string }>;
  invoke(
    input: { readonly functionName: string; readonly payload?: Uint8Array },
    signal: AbortSignal,
  ): Promise<{ readonly statusCode?: number; readonly functionError?: string; readonly payload?: Uint8Array }>;
  rotateSecret(input: { readonly secretId: string }, signal: AbortSignal): Promise<{ readonly versionId?: string }>;
}

/**
 * A worker's agent node in its tenant's inventory (a worker started with `CAPSTAN_NODE_ID`):
 * registered when the worker starts, kept online by each heartbeat, offline when it drains.
 */
export interface AgentNode {
  register(): Promise<void>;
  beat(): Promise<void>;
  deregister(): Promise<void>;
}
