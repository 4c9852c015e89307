import type { Json } from '../../shared/domain/canonical.js';

/** What an action gets: its checked params, the attempt, a cancellation signal and an output sink. */
export interface ActionContext<P = Record<string, unknown>> {
  readonly params: P;
  readonly attempt: number;
  readonly signal: AbortSignal;
  readonly secrets: Readonly<Record<string, string>>;
  output(stream: 'stdout' | 'stderr', text: string): void;
  /** Stores a file the step produced under its run (absent where the worker has no evidence bucket). */
  artifact?(name: string, body: Uint8Array): Promise<{ name: string; size: number; sha256: string }>;
}

export interface ActionResult {
  readonly output?: Record<string, Json>;
}

/** A failure an action reports on purpose; `retryable` tells the planner whether another attempt may help. */
export class ActionError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
    this.name = 'ActionError';
  }
}

export type ActionHandler = (context: ActionContext) => Promise<ActionResult>;

/** A backend implements the actions the catalogue declares for it (see docs/backends.md). */
export interface Backend {
  readonly name: string;
  readonly actions: Readonly<Record<string, ActionHandler>>;
  /** Secret ids an action's params name (beyond the step's `secrets`), fetched before it runs. */
  secretsFor?(action: string, params: Record<string, unknown>): readonly string[];
}

/** Parses params the worker already checked, for a typed view of them. */
export function typed<T>(schema: { parse(input: unknown): T }, params: Record<string, unknown>): T {
  return schema.parse(params);
}

/** Resolves after `ms`, or rejects when the signal aborts. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason as Error);
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(signal.reason as Error);
      },
      { once: true },
    );
  });
}
