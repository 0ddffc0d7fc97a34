import os from 'node:os';
import { LeaseEnding, LeaseLost, LeaseNotGranted, LeaseUnreachable, type NotGrantedWhy } from '../../client/leaseErrors.ts';
import { Unreachable } from '../../client/errors.ts';
import { isConnectionFailure } from '../../db/connectionFailure.ts';
import { exitStatusOf } from '../exitStatus.ts';

/**
 * `lease run` exits with its command's status, or with one of these, each
 * its own, so that a CI job can tell "the tests failed" from "no resource".
 * They sit below 126–127 (a shell's "cannot run" and "not found", which
 * `lease run` also uses for its command) and 128 + n (killed by signal n).
 */
export const LEASE_RUN_EXIT = {
  /** The request was refused: a quota with --no-queue, a selector nothing can match, a bad request, a token that may not. */
  refused: 121,
  /** The lease was not active by its wait deadline (--wait-timeout). */
  deadline: 122,
  /** Setting the lease up failed (its resource could not be made). */
  failed: 123,
  /**
   * The lease ended from outside (an operator, its expiry, the collector, its resource gone) while the command ran or before it started,
   * or Slipway said it would end it (a time limit), so the command was stopped.
   */
  ended: 124,
  /** Slipway could not be reached for as long as the lease's heartbeat deadline allows. */
  unreachable: 125,
  /** The command was found but could not be run. */
  cannotRun: 126,
  /** The command was not found. */
  notFound: 127,
} as const;

const BY_WHY: Readonly<Record<Exclude<NotGrantedWhy, 'stopped'>, number>> = {
  refused: LEASE_RUN_EXIT.refused,
  deadline: LEASE_RUN_EXIT.deadline,
  failed: LEASE_RUN_EXIT.failed,
  released: LEASE_RUN_EXIT.ended,
};

/** The exit status for whatever stopped `lease run` before its command could finish, and the line that says why. */
export function leaseRunFailure(error: unknown): { readonly exitCode: number; readonly message: string } {
  if (error instanceof LeaseNotGranted) {
    if (error.why === 'stopped') return { exitCode: signalStatus(error.cause), message: error.message };
    return { exitCode: BY_WHY[error.why], message: error.message };
  }
  if (error instanceof LeaseLost || error instanceof LeaseEnding) return { exitCode: LEASE_RUN_EXIT.ended, message: error.message };
  if (error instanceof LeaseUnreachable || error instanceof Unreachable || isConnectionFailure(error)) {
    return { exitCode: LEASE_RUN_EXIT.unreachable, message: (error as Error).message };
  }
  const { exitCode, message } = exitStatusOf(error);
  return { exitCode, message: message ?? String(error) };
}

/** 128 + the signal's number, as a shell reports a process a signal stopped. */
export function signalStatus(signal: unknown): number {
  const number = typeof signal === 'string' ? os.constants.signals[signal as NodeJS.Signals] : undefined;
  return 128 + (number ?? os.constants.signals.SIGINT);
}
