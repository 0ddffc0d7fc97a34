import type pg from 'pg';
import type { ObjectKind } from '../../../migrations/schema.ts';

/**
 * The object's session-level advisory lock, on the drain's dedicated
 * connection. Session-level (not transaction-level) so it spans the several
 * short transactions and the driver calls of one drain; if the worker dies,
 * PostgreSQL ends the session and frees the lock.
 */
export async function tryLockObject(client: pg.PoolClient, kind: ObjectKind, id: number): Promise<boolean> {
  const { rows } = await client.query<{ locked: boolean }>({
    name: 'slipway_try_lock',
    text: 'select pg_try_advisory_lock(object_lock_key($1, $2)) as locked',
    values: [kind, id],
  });
  return rows[0]?.locked === true;
}

export async function unlockObject(client: pg.PoolClient, kind: ObjectKind, id: number): Promise<void> {
  await client.query({
    name: 'slipway_unlock',
    text: 'select pg_advisory_unlock(object_lock_key($1, $2))',
    values: [kind, id],
  });
}
