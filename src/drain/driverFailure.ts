import type { CommandRow, ObjectKind } from '../../migrations/schema.ts';
import { canTransition } from '../domain/lifecycle.ts';
import { PermanentDriverError, TransientDriverError } from '../drivers/Driver.ts';
import type { Outcome } from './Handler.ts';
import { send } from './messages.ts';
import { formatDuration } from '../domain/durations.ts';

/** Retry delay after the n-th transient failure: 0.5 s doubling, capped at a minute. */
export function backoffMs(attempts: number): number {
  return Math.min(500 * 2 ** attempts, 60_000);
}

/** How long after a transient failure (its `attempts`-th before this one) a call is tried again: the driver's hint, else the backoff. */
export function retryDelayMs(error: Error, attempts: number): number {
  return error instanceof TransientDriverError && error.retryAfterMs ? error.retryAfterMs : backoffMs(attempts);
}

/**
 * A driver call failed. Transient (or unknown) errors leave the command
 * queued to retry with backoff; a permanent one breaks the object, which is
 * then destroyed.
 */
export function driverFailure(kind: ObjectKind, state: string, command: CommandRow, error: Error): Outcome {
  if (error instanceof PermanentDriverError) {
    // A blueprint has no broken state (and so no destroy to send itself).
    const breaks = kind !== 'blueprint' && canTransition(kind, state, 'broken');
    return {
      status: 'failed',
      message: `driver failed permanently: ${error.message}`,
      ...(breaks
        ? {
            to: 'broken',
            set: { message: error.message },
            followUps: [send[kind].destroy(command.target_id, `broken: ${error.message}`)],
          }
        : {}),
    };
  }
  const retryInMs = retryDelayMs(error, command.attempts);
  return {
    status: 'yield',
    message: `driver error (attempt ${command.attempts + 1}), retrying in ${formatDuration(retryInMs)}: ${error.message}`,
    retryInMs,
    events: [{ type: 'driver_error', message: error.message, data: { attempt: command.attempts + 1, retryInMs } }],
  };
}
