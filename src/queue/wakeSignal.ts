import { sql } from 'kysely';
import { selectAsynchronously } from '../db/asynchronousCommit.ts';
import type { Db } from '../db/Database.ts';

/** The channel on which workers hear that wake-ups are due (src/drain/DrainEngine.ts). */
export const WAKE_CHANNEL = 'slipway_wake';

/**
 * Tells every worker to look for due wake-ups. Send it AFTER the commit that
 * wrote them, never inside a durable transaction: PostgreSQL holds a
 * database-wide lock from a notifying transaction's commit until its WAL
 * flush, so a NOTIFY in our durable commits would line all of them up behind
 * one another. Here the NOTIFY has a transaction of its own that commits
 * without waiting for the flush. Losing it (a crash, a dropped connection)
 * only delays the drain to the workers' next poll: the wake-up row is
 * already durable.
 */
export async function signalWorkers(db: Db): Promise<void> {
  await selectAsynchronously(db, sql`pg_notify(${WAKE_CHANNEL}, '')`);
}

/**
 * signalWorkers for a caller that must not fail for it: the command is
 * already committed, and the poll is the backstop. Errors are swallowed on
 * purpose (a database that cannot take the signal will fail the next
 * request anyway, which reports it).
 */
export function signalWorkersQuietly(db: Db): Promise<void> {
  return signalWorkers(db).catch(() => undefined);
}
