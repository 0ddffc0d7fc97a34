import { CompiledQuery } from 'kysely';
import type pg from 'pg';
import { simpleQueryText } from '../../db/preparedText.ts';
import type { ObjectRef } from '../../queue/objectTables.ts';
import { asVersionConflict } from '../commitOutcome.ts';

/**
 * Opens the outcome transaction and, as its first statement, locks the
 * object's own row and checks it is still the version the drain carries
 * (slipway_lock_object_version, migrations/0012: SW001 otherwise). One
 * round trip; the commit's own round trip does the same when the decision
 * made no query of its own (see commitOutcomeAndContinue).
 *
 * Why lock a row only we write: callers appending from outside read the
 * object's state FOR SHARE (see slipway_append_command), so this lock orders
 * every state change against every admission check. An append either commits
 * before the change (and a duplicate release joins the release still in
 * flight) or reads the state after it (and is refused); it can never read
 * "active", let the release commit, and then queue a second release.
 *
 * Why first: the handler's decision may then lock other rows (a resource
 * reads its blueprint's row FOR SHARE) and the follow-ups lock other
 * objects' wake-up jobs. Taking our own row before any of those means a
 * waiting append never sits between them in a cycle of waits.
 */
export async function beginLockingObjectRow(client: pg.PoolClient, target: ObjectRef, version: number): Promise<void> {
  try {
    await client.query(await simpleQueryText(client, ['begin', lockObjectVersionQuery(target, version)]));
  } catch (error) {
    throw asVersionConflict(error);
  }
}

/** The row lock and version check of beginLockingObjectRow, for a query that opens the transaction itself. */
export function lockObjectVersionQuery(target: ObjectRef, version: number): CompiledQuery {
  return CompiledQuery.raw('select slipway_lock_object_version($1, $2, $3)', [target.kind, target.id, version]);
}
