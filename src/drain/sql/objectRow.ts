import type { Db } from '../../db/Database.ts';
import { OBJECT_TABLE, type ObjectRef } from '../../queue/objectTables.ts';
import { VersionConflictError } from '../commitOutcome.ts';

/**
 * The first statement of every outcome transaction: lock the object's own
 * row, and check it is still the version the command was applied to.
 *
 * Why lock a row only we write: callers appending from outside read the
 * object's state FOR SHARE (see appendCommand), so this lock orders every
 * state change against every admission check. An append either commits
 * before the change (and a duplicate release joins the release still in
 * flight) or reads the state after it (and is refused); it can never read
 * "active", let the release commit, and then queue a second release.
 *
 * Why first: the handler's decision may then lock other rows (a resource
 * reads its blueprint's row FOR SHARE) and the follow-ups lock other
 * objects' wake-up jobs. Taking our own row before any of those means a waiting append never
 * sits between them in a cycle of waits.
 */
export async function lockObjectRow(trx: Db, target: ObjectRef, version: number): Promise<void> {
  const row = await trx
    .selectFrom(OBJECT_TABLE[target.kind] as 'leases')
    .select('version')
    .where('id', '=', target.id)
    .forNoKeyUpdate()
    .executeTakeFirstOrThrow();
  if (row.version !== version) {
    throw new VersionConflictError(`${target.kind} ${target.id} is at version ${row.version}, not ${version}, under its drain`);
  }
}
