import { type RawBuilder, sql } from 'kysely';
import type { Db } from '../db/Database.ts';
import type { ObjectRef } from '../db/objectTables.ts';

/** An object to wake, with its own due time (default: the call's `runAt`, else now). */
export type WakeTarget = ObjectRef & { runAt?: Date | undefined };

/**
 * Records, in the caller's transaction, that each object must be drained
 * (SQL function slipway_wake_objects, src/db/functions/slipway_wake_objects.ts; one
 * round trip): one row per object in drain_wakeups, never moved later. The
 * row commits with the command that needs it, so nothing is stranded; the
 * drain engine takes it (src/drain/sql/claim.ts). Workers hear of it from
 * the signal the caller sends after its commit (wakeSignal.ts), or from
 * their poll.
 *
 * Rows are written in job-key order, and a transaction should wake all the
 * objects it wakes in one call at its end (as the drain's commit does), so
 * that two transactions waking overlapping sets lock them in the same order.
 */
export async function wakeObjects(db: Db, targets: readonly WakeTarget[], runAt?: Date): Promise<void> {
  if (targets.length > 0) await wakeObjectsQuery(targets, runAt).execute(db);
}

/** The statement wakeObjects runs, for a caller that sends it together with others (the drain's commit). */
export function wakeObjectsQuery(targets: readonly WakeTarget[], runAt?: Date): RawBuilder<unknown> {
  const kinds = targets.map((t) => t.kind);
  const ids = targets.map((t) => t.id);
  const runAts = targets.map((t) => (t.runAt ?? runAt ?? null)?.toISOString() ?? null);
  return sql`select slipway_wake_objects(null, ${kinds}::text[], ${ids}::bigint[], ${runAts}::timestamptz[])`;
}
