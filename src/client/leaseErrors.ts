import type { Lease } from '../api/shapes.ts';
import { formatTime } from '../domain/times.ts';

/** Who ended a lease (an actor: a token, a user, system:gc, system:deadline...) and the line that says so. */
export interface LeaseEnd {
  readonly by: string | null;
  /** The state it was taken to (released, broken), or its state now when the timeline does not say. */
  readonly to: string;
  readonly text: string;
}

/**
 * Why a lease was never active for the work:
 * - `refused`: the request itself was (a quota with `queue: false`, a selector nothing can match, a bad request, a token that may not);
 * - `deadline`: not active by its wait deadline;
 * - `failed`: setting it up failed (its resource could not be made, or the driver failed for good);
 * - `released`: someone released it while it waited;
 * - `stopped`: the caller stopped waiting (its signal).
 */
export type NotGrantedWhy = 'refused' | 'deadline' | 'failed' | 'released' | 'stopped';

/** The lease never became active, so the work never ran. Any lease that was made has been released. */
export class LeaseNotGranted extends Error {
  override name = 'LeaseNotGranted';

  constructor(
    readonly why: NotGrantedWhy,
    message: string,
    readonly lease?: Lease,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }

  static refused(error: Error): LeaseNotGranted {
    return new LeaseNotGranted('refused', `the lease was refused: ${error.message}`, undefined, { cause: error });
  }

  static ended(lease: Lease, end: LeaseEnd): LeaseNotGranted {
    if (end.to === 'broken') return new LeaseNotGranted('failed', `lease ${lease.id} could not be set up: ${end.text}`, lease);
    if (end.by === 'system:deadline') {
      return new LeaseNotGranted(
        'deadline',
        `lease ${lease.id} was not active by its wait deadline${lease.waitDeadline ? ` ${formatTime(lease.waitDeadline)}` : ''}`,
        lease,
      );
    }
    return new LeaseNotGranted('released', `lease ${lease.id} ended before it was active: ${end.text}`, lease);
  }

  static stopped(reason: unknown): LeaseNotGranted {
    return new LeaseNotGranted('stopped', `stopped waiting for the lease${typeof reason === 'string' ? ` (${reason})` : ''}`, undefined, {
      cause: reason,
    });
  }
}

/** The lease ended from outside while the work ran (an operator's release, its expiry, the collector, its resource gone). */
export class LeaseLost extends Error {
  override name = 'LeaseLost';

  constructor(
    readonly lease: Lease,
    readonly end: LeaseEnd,
  ) {
    super(`lease ${lease.id} ended while held: ${end.text}`);
  }
}

/**
 * Slipway told the holder it will end the lease (its `ending`: a time limit
 * reached), so the work was asked to stop; the lease was released when it did.
 */
export class LeaseEnding extends Error {
  override name = 'LeaseEnding';

  constructor(
    readonly lease: Lease,
    readonly ending: NonNullable<Lease['ending']>,
  ) {
    super(`lease ${lease.id} is ending by ${formatTime(new Date(ending.at))}: ${ending.reason}`);
  }
}

/**
 * Slipway could not be reached for longer than the lease's heartbeat
 * deadline allows (while it ran, the lease is lost by then), or refused a
 * call that holding it needs (a revoked token).
 */
export class LeaseUnreachable extends Error {
  override name = 'LeaseUnreachable';

  constructor(
    readonly lease: Lease | undefined,
    cause: Error,
  ) {
    super(`Slipway could not be reached${lease ? ` while lease ${lease.id} was held` : ''}: ${cause.message}`, { cause });
  }
}
