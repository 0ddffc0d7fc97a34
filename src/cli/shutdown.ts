import os from 'node:os';

/** Why the CLI stops before its command is done. */
export type StopReason = 'SIGINT' | 'SIGTERM' | 'parent process exited' | 'stdout closed';

/**
 * Signals this soon after the first are copies of it, not a second request:
 * a terminal's Ctrl-C reaches npm and Slipway alike and npm forwards its copy
 * to Slipway too; systemd signals every process of a service, npm included.
 */
const SIGNAL_COPIES_MS = 2000;
/** How often a CLI run by npm looks whether npm (or npm's shell) is still its parent. */
const PARENT_CHECK_MS = 1000;

const controller = new AbortController();

/** The signals a command that runs another program passes on to it. */
export type PassedSignal = 'SIGINT' | 'SIGTERM' | 'SIGHUP';
let diverted: ((signal: PassedSignal) => void) | undefined;

/** Aborted, with a StopReason, by whatever stops the CLI first: long-running commands stop cleanly. */
export const interrupted: AbortSignal = controller.signal;

/**
 * Makes stopping this CLI its own business, so that a worker finishes its
 * drains and the database (and an embedded server this process started)
 * closes in order, whatever stops it:
 * - the first SIGINT or SIGTERM aborts `interrupted`; a later one exits at once;
 * - stdout closing (`slipway ... | head -1`) aborts it too, where Node would
 *   otherwise die of an unhandled EPIPE with a stack trace;
 * - run by npm (`npm start`), its parent going away aborts it: npm stopped
 *   without passing a signal on (it was killed, or a script without `exec`
 *   left a shell in between, which a SIGTERM kills). Outside npm a parent's
 *   exit is no reason to stop: `nohup slipway start &` must outlive its shell.
 */
export function takeOverShutdown(): void {
  let firstSignalAt: number | undefined;
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      if (diverted) diverted(signal);
      else if (firstSignalAt === undefined) {
        firstSignalAt = Date.now();
        stop(signal);
      } else if (Date.now() - firstSignalAt >= SIGNAL_COPIES_MS) {
        process.exit(128 + os.constants.signals[signal]);
      }
    });
  }
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') throw error;
    stop('stdout closed');
  });
  if (process.env.npm_lifecycle_event !== undefined) stopWhenParentExits();
}

/**
 * Hands SIGINT, SIGTERM and SIGHUP to `to` instead, until the returned
 * function is called: `lease run` passes them on to its command, or stops
 * waiting for its lease, and decides itself when to exit.
 */
export function divertSignals(to: (signal: PassedSignal) => void): () => void {
  const hangUp = () => to('SIGHUP');
  diverted = to;
  process.on('SIGHUP', hangUp);
  return () => {
    diverted = undefined;
    process.off('SIGHUP', hangUp);
  };
}

/** True when nobody reads the CLI's stdout any more. */
export function stdoutClosed(): boolean {
  return interrupted.reason === ('stdout closed' satisfies StopReason);
}

/** Resolves once the CLI is told to stop. */
export function untilInterrupted(): Promise<void> {
  if (interrupted.aborted) return Promise.resolve();
  return new Promise((resolve) => interrupted.addEventListener('abort', () => resolve(), { once: true }));
}

function stop(reason: StopReason): void {
  if (!interrupted.aborted) controller.abort(reason);
}

/** An orphan is adopted by init or a subreaper: its parent pid changes. */
function stopWhenParentExits(): void {
  const parent = process.ppid;
  const watch = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(watch);
    stop('parent process exited');
  }, PARENT_CHECK_MS);
  watch.unref();
}
