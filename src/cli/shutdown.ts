const controller = new AbortController();

/** Aborted by the first SIGINT or SIGTERM: long-running commands stop cleanly. */
export const interrupted: AbortSignal = controller.signal;

/**
 * Makes SIGINT/SIGTERM this CLI's to handle: the first signal aborts
 * `interrupted`, so a worker finishes its drains and the database (and an
 * embedded server this process started) closes in order; a second signal
 * exits at once.
 */
export function takeOverShutdown(): void {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      if (controller.signal.aborted) process.exit(128 + (signal === 'SIGINT' ? 2 : 15));
      controller.abort(signal);
    });
  }
}

/** Resolves on the first SIGINT or SIGTERM. */
export function untilInterrupted(): Promise<void> {
  if (interrupted.aborted) return Promise.resolve();
  return new Promise((resolve) => interrupted.addEventListener('abort', () => resolve(), { once: true }));
}
