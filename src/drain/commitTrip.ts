import type { CompiledQuery } from 'kysely';
import { DISPATCH_CALLBACKS } from '../callbacks/dispatchCallbacks.ts';
import { GENERIC_PLANS } from '../db/genericPlans.ts';
import type { ObjectRef } from '../db/objectTables.ts';
import type { StepStatements } from './commitOutcome.ts';
import type { DecidedStep } from './decideStep.ts';
import { RoundTrip } from './roundTrip.ts';
import { commandNotice, noticesStatement } from '../queue/announcements.ts';
import { claimStatement } from './sql/claim.ts';
import { ASYNCHRONOUS_BEGIN, NO_SEQ_SCANS, settings } from './sql/laneTransactions.ts';
import { objectRowsStatements } from './sql/objectRows.ts';
import { runsStatement } from './sql/runs.ts';

/** What the round trip that ends a step reads back, by name. */
export type CommitReads = 'updates' | 'claimed' | 'next' | 'prefetched';

export interface CommitTripInput {
  readonly step: DecidedStep;
  readonly statements: StepStatements;
  /** Commands this worker cannot run, noted and left queued. */
  readonly handOffs: readonly CompiledQuery[];
  /** False for a step that only looks for work (every object in flight): it commits nothing. */
  readonly commits: boolean;
  /** How many more objects the lane may take. */
  readonly room: number;
  /** The objects the claim is asked to take first: those the follow-ups woke that the lane does not hold. */
  readonly wanted: readonly ObjectRef[];
  /** Every object the lane holds. */
  readonly held: readonly ObjectRef[];
  /** The held objects with no call in flight, whose next commands are read (one in flight keeps its head and its lock). */
  readonly settled: readonly ObjectRef[];
}

/**
 * The one round trip that ends a step: it commits every outcome (the rows
 * locked and version-checked first, unless the step's transaction is already
 * open), then sends the step's notices in an asynchronously committed
 * transaction of their own, then, in another, queues the jobs of the
 * callback deliveries the commit made due, takes due wake-ups (the objects
 * the follow-ups woke first), reads each settled object's next commands,
 * and reads the rows of the woken objects it took.
 */
export function commitTrip(input: CommitTripInput): RoundTrip<CommitReads> {
  const { step, statements, room, wanted } = input;
  const trip = new RoundTrip<CommitReads>();
  if (input.commits) {
    // A step that decided in its transaction opened it with the settings (decideStep).
    const opening = step.inTransaction ? [] : ['begin', settings(NO_SEQ_SCANS, GENERIC_PLANS), step.lockVersions];
    trip
      .add(...opening)
      .read(
        'updates',
        statements.objectUpdates.map((u) => u.query),
      )
      .add(...statements.rest, ...input.handOffs, 'commit');
  }
  // The notices commit on their own, first: a NOTIFY is delivered when its
  // transaction commits, and waiters need not wait for the claim's work.
  const notices = step.decided.map((d) => commandNotice(d.target, d.command.id, d.outcome.status));
  if (notices.length > 0) trip.add(...ASYNCHRONOUS_BEGIN, noticesStatement(notices), 'commit');
  // The rows of the objects the claim is asked to take first, read after
  // it (a statement of its own: a fresh snapshot, with their locks held),
  // so the objects a step hands itself cost no round trip to adopt. Rows of
  // objects it did not get are ignored.
  const prefetch = room > 0 && wanted.length > 0 ? objectRowsStatements(wanted) : [];
  // The callback deliveries the commit made due get their jobs here, outside it (see dispatchCallbacks.ts).
  const dispatch = input.commits ? [DISPATCH_CALLBACKS] : [];
  return trip
    .add(...ASYNCHRONOUS_BEGIN, ...dispatch)
    .read('claimed', [claimStatement(room, wanted, input.held)])
    .read('next', [runsStatement(input.settled)])
    .read('prefetched', prefetch)
    .add('commit');
}
