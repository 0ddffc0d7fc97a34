import { sql } from 'kysely';
import { selectAsynchronously } from '../db/asynchronousCommit.ts';
import type { Db } from '../db/Database.ts';

/**
 * The statement that queues the graphile-worker job of every callback
 * delivery that is due and has none yet (migration 0016). It goes in an
 * asynchronously committed transaction AFTER the durable commit that made
 * the delivery due, never inside it: add_job sends a NOTIFY, and PostgreSQL
 * holds a database-wide lock from a notifying commit through its WAL flush.
 */
export const DISPATCH_CALLBACKS = 'select slipway_dispatch_callbacks()';

/** Queues due deliveries' jobs in a transaction of their own that does not wait for its WAL flush; answers how many. */
export function dispatchCallbacks(db: Db): Promise<number> {
  return selectAsynchronously(db, sql<number>`slipway_dispatch_callbacks()`);
}

/**
 * dispatchCallbacks for a caller whose own work has committed and must not
 * fail for this: a delivery left undispatched is picked up by the next
 * dispatch anywhere, at the latest by a sweeper's pass.
 */
export function dispatchCallbacksQuietly(db: Db): Promise<void> {
  return dispatchCallbacks(db).then(
    () => undefined,
    () => undefined,
  );
}
