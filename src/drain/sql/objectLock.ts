import type pg from 'pg';
import type { ObjectKind } from '../../../migrations/schema.ts';

/**
 * The object's session-level advisory lock, on the drain's dedicated
 * connection. Session-level (not transaction-level) so it spans the several
 * short transactions and the driver calls of one drain; if the worker dies,
 * PostgreSQL ends the session and frees the lock.
 *
 * The drain takes it together with its first reads, and lets go of it
 * together with its last look (slipway_drain_start and slipway_drain_next,
 * migrations/0012, sent by queueHead.ts); this is the unlock on its way out
 * after a failure.
 */
export async function unlockObject(client: pg.PoolClient, kind: ObjectKind, id: number): Promise<void> {
  await client.query({
    name: 'slipway_unlock',
    text: 'select pg_advisory_unlock(object_lock_key($1, $2))',
    values: [kind, id],
  });
}
