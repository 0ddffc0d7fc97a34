import { sql } from 'kysely';
import type { Db } from '../db/Database.ts';
import { DRAIN_TASK, type ObjectRef } from './objectTables.ts';

/** An object to wake, with its own due time (default: the call's `runAt`, else now). */
export type WakeTarget = ObjectRef & { runAt?: Date | undefined };

/**
 * Schedules a drain of each object, in the caller's transaction, so a command
 * and its wake-up commit together. One job per object, keyed
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
  if (targets.length === 0) return;
  const kinds = targets.map((t) => t.kind);
  const ids = targets.map((t) => t.id);
  const runAts = targets.map((t) => (t.runAt ?? runAt ?? null)?.toISOString() ?? null);
  await sql`
    with wanted as (
      select kind, id, object_drain_job_key(kind, id) as job_key,
             min(coalesce(u.run_at, now())) as run_at
      from unnest(${kinds}::text[], ${ids}::bigint[], ${runAts}::timestamptz[]) as u(kind, id, run_at)
      group by kind, id
    ),
    already_due as (
      select j.key from graphile_worker._private_jobs j
      join wanted w on j.key = w.job_key
      where j.is_available and j.run_at <= w.run_at
      order by j.key
      for share of j
    )
    select graphile_worker.add_job(
      identifier := case t.kind when 'lease' then ${DRAIN_TASK.lease}
                                when 'resource' then ${DRAIN_TASK.resource}
                                else ${DRAIN_TASK.blueprint} end,
      payload := json_build_object('id', t.id),
      run_at := t.run_at,
      job_key := t.job_key
    )
    from wanted t
    where t.job_key not in (select key from already_due)
    order by t.job_key
  `.execute(db);
}
