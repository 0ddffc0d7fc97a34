import { CompiledQuery } from 'kysely';
import type pg from 'pg';
import { simpleQueryText } from '../../db/preparedText.ts';
import type { ObjectRef } from '../../queue/objectTables.ts';
import { VersionConflictError } from '../commitOutcome.ts';

/**
 * Opens the outcome transaction and, as its first statement, locks the
 * object's own row and checks it is still the version the command was
 * applied to. One round trip: both statements go as one simple query
 * (slipway_lock_object_row, migrations/0010).
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
  const text = await simpleQueryText(client, ['begin', lockObjectRowQuery(target)]);
  const results = (await client.query(text)) as unknown as pg.QueryResult<{ version: number | null }>[];
  expectVersion(target, results[1]?.rows[0], version);
}

/** The row lock of beginLockingObjectRow, for a query that opens the transaction itself (see commitOutcomeAndReadHead). */
export function lockObjectRowQuery(target: ObjectRef): CompiledQuery {
  return CompiledQuery.raw('select slipway_lock_object_row($1, $2) as version', [target.kind, target.id]);
}

/** Checks what the row lock read against the version the drain carries. */
export function expectVersion(target: ObjectRef, row: { version: number | null } | undefined, version: number): void {
  if (row?.version == null) throw new Error(`${target.kind} ${target.id} has no row`);
  if (row.version !== version) {
    throw new VersionConflictError(`${target.kind} ${target.id} is at version ${row.version}, not ${version}, under its drain`);
  }
}
