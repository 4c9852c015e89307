/**
 * Work a caller starts and lets finish on its own while it goes on (a worker resuming the
 * interpreter and deleting a command while it takes its next one). A failure is reported, never
 * thrown at whoever goes on; `settled` waits for everything started so far, as a drain must.
 */
export class Later {
  private readonly pending = new Set<Promise<void>>();

  constructor(private readonly onError: (what: string, error: Error) => void) {}

  /** Lets `work` finish on its own; `what` names it when it fails. */
  run(what: string, work: Promise<unknown>): void {
    const tracked: Promise<void> = work
      .then(
        () => undefined,
        (error: unknown) => {
          try {
            this.onError(what, error instanceof Error ? error : new Error(String(error)));
          } catch {
            // Reporting failed too: nothing more can be done about it, and it must not stop the caller.
          }
        },
      )
      .finally(() => this.pending.delete(tracked));
    this.pending.add(tracked);
  }

  /** How much is still running. */
  get size(): number {
    return this.pending.size;
  }

  /** Resolves once everything started so far (and what that started) has finished. */
  async settled(): Promise<void> {
    while (this.pending.size > 0) await Promise.all([...this.pending]);
  }
}
