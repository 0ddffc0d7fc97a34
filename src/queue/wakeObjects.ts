import { type RawBuilder, sql } from 'kysely';
import type { Db } from '../db/Database.ts';
import { DRAIN_TASK, type ObjectRef } from './objectTables.ts';

/** An object to wake, with its own due time (default: the call's `runAt`, else now). */
export type WakeTarget = ObjectRef & { runAt?: Date | undefined };

/**
 * Schedules a drain of each object, in the caller's transaction, so a command
 * and its wake-up commit together (SQL function slipway_wake_objects, in
 * migrations/0007_fast_paths.ts; one round trip). One job per object, keyed
 * `drain:<kind>:<id>` (SQL function object_drain_job_key):
 *
 * - An object whose wake-up is already pending and due no later than asked
 *   (the common case in a burst) gets no new job: we share-lock the pending
 *   one instead. graphile-worker takes jobs FOR UPDATE SKIP LOCKED, so it
 *   cannot start that job before our transaction commits, and the drain it
 *   starts then sees our command. This spares add_job, by far the dearest
 *   part of an append. (It reads graphile-worker's `_private_jobs` table,
 *   whose shape is pinned by the exact graphile-worker version in the lockfile.)
 * - Otherwise add_job runs, replacing a pending job that was due later (so a
 *   wake-up never moves one later: under load the busiest object's job would
 *   otherwise keep getting a fresh run_at and never reach the head of the
 *   backlog), or queueing a fresh one behind a locked, i.e. running, one.
 *
 * Jobs are locked in job-key order, and a transaction should wake all the
 * objects it wakes in one call at its end (as commitOutcome does), so that
 * two transactions waking overlapping sets lock in the same order. That
 * makes a deadlock rare, not impossible: the share-locks are taken before
 * add_job's updates, so two transactions that disagree about which jobs are
 * "already due" can still cross. The drain retries its commit when
 * PostgreSQL breaks such a deadlock (see ObjectDrain).
 */
export async function wakeObjects(db: Db, targets: readonly WakeTarget[], runAt?: Date): Promise<void> {
  if (targets.length > 0) await wakeObjectsQuery(targets, runAt).execute(db);
}

/** The statement wakeObjects runs, for a caller that sends it together with others (the drain's commit). */
export function wakeObjectsQuery(targets: readonly WakeTarget[], runAt?: Date): RawBuilder<unknown> {
  const tasks = targets.map((t) => DRAIN_TASK[t.kind]);
  const kinds = targets.map((t) => t.kind);
  const ids = targets.map((t) => t.id);
  const runAts = targets.map((t) => (t.runAt ?? runAt ?? null)?.toISOString() ?? null);
  return sql`select slipway_wake_objects(${tasks}::text[], ${kinds}::text[], ${ids}::bigint[], ${runAts}::timestamptz[])`;
}
