import { CompiledQuery } from 'kysely';
import type pg from 'pg';
import type { BlueprintRow, CommandRow } from '../../../migrations/schema.ts';
import { simpleQueryText } from '../../db/preparedText.ts';
import { OBJECT_TABLE, type ObjectRef } from '../../queue/objectTables.ts';
import { type OutcomeStatements, VERSION_CONFLICT_SQLSTATE, VersionConflictError } from '../commitOutcome.ts';
import { lockObjectRowQuery } from './objectRow.ts';
import type { PendingAnnouncements } from './announcements.ts';

// The queue head of one object (slipway_queue_head, migrations/0010). A
// `running` command comes first: finding one means the previous lock holder
// died mid-command, so it is repeated (driver calls are at least once). Then
// preempting kinds (release, reclaim) ahead of older work, then everything
// else in order. Preemption is about order only: a yielded release waits out
// its own not-before like anything else (else a release whose driver keeps
// failing, or one this worker cannot run, would be retried in a hot loop),
// and a yielded allocation is not ready, so it never holds a release up.
//
// The drain sends these reads in one simple query with the statement before
// them (a commit, an unlock), one round trip instead of two, each a prepared
// statement (see simpleQueryText) calling functions whose plans stay cached.
const headQuery = (target: ObjectRef, preempting: readonly string[]) =>
  CompiledQuery.raw('select * from slipway_queue_head($1, $2, $3::text[])', [target.kind, target.id, preempting]);

type Results<T> = pg.QueryResult<T & pg.QueryResultRow>;

/**
 * Starts a lock hold in one round trip: opens the first outcome transaction
 * and tries the object's session advisory lock (see objectLock.ts), locking
 * the object's row as well when it got it (slipway_lock_object); then reads
 * the queue head, the object's row and, for a lease or resource, its
 * blueprint. Each is its own statement, so the reads see everything committed
 * before the lock was taken; when it was not, their rows are ignored and the
 * empty transaction is rolled back. When it was, the transaction stays open
 * for the caller, as after commitOutcomeAndReadHead.
 */
export async function lockAndReadHead<Row>(
  client: pg.PoolClient,
  target: ObjectRef,
  preempting: readonly string[],
): Promise<
  | { locked: false }
  | { locked: true; head: CommandRow | undefined; object: Row | undefined; blueprint: BlueprintRow | undefined }
> {
  const table = OBJECT_TABLE[target.kind];
  const text = await simpleQueryText(client, [
    'begin',
    CompiledQuery.raw('select slipway_lock_object($1, $2) as locked', [target.kind, target.id]),
    headQuery(target, preempting),
    CompiledQuery.raw(`select * from ${table} where id = $1`, [target.id]),
    ...(target.kind === 'blueprint'
      ? []
      : [CompiledQuery.raw(`select * from blueprints where id = (select blueprint_id from ${table} where id = $1)`, [target.id])]),
  ]);
  const [, lock, head, object, ofBlueprint] = (await client.query(text)) as unknown as [unknown, Results<{ locked: boolean }>, Results<CommandRow>, Results<Row>, Results<BlueprintRow> | undefined];
  if (lock.rows[0]?.locked !== true) {
    await client.query('rollback');
    return { locked: false };
  }
  return { locked: true, head: head.rows[0], object: object.rows[0], blueprint: ofBlueprint?.rows[0] };
}

/**
 * Commits one command's outcome and gets the next one going, in ONE round
 * trip: the outcome's statements (see outcomeStatements), the commit, the
 * next queue head, and the next outcome transaction opened with the
 * object's row locked (see objectRow.ts), ready for the next command's
 * decision. Whoever takes the result must end that transaction: the next
 * outcome's commit, the mark before a driver call, or the unlock.
 *
 * The outcome's checks fail inside the query, so the commit after them never
 * runs (PostgreSQL abandons the rest of a simple query at its first error)
 * and the caller rolls back. Nothing after the commit can fail for a reason
 * worth retrying: the row lock is on a row that only the advisory lock's
 * holder writes, taken in a transaction that holds nothing else.
 */
export async function commitOutcomeAndReadHead<Row>(
  client: pg.PoolClient,
  target: ObjectRef,
  preempting: readonly string[],
  outcome: OutcomeStatements,
): Promise<{ object: Row | undefined; head: CommandRow | undefined; locked: { version: number | null } | undefined }> {
  const statements = [...(outcome.objectUpdate ? [outcome.objectUpdate] : []), ...outcome.rest];
  const text = await simpleQueryText(client, [...statements, 'commit', headQuery(target, preempting), 'begin', lockObjectRowQuery(target)]);
  let results: Results<unknown>[];
  try {
    results = (await client.query(text)) as unknown as Results<unknown>[];
  } catch (error) {
    if ((error as { code?: string }).code === VERSION_CONFLICT_SQLSTATE) throw new VersionConflictError((error as Error).message);
    throw error;
  }
  const after = statements.length;
  return {
    object: outcome.objectUpdate ? (results[0] as Results<Row>).rows[0] : undefined,
    head: (results[after + 1] as Results<CommandRow>).rows[0],
    locked: (results[after + 3] as Results<{ version: number | null }>).rows[0],
  };
}

/**
 * Ends the outcome transaction commitOutcomeAndReadHead opened, when it is
 * not used for an outcome (no command left, or a driver call to make first,
 * which no transaction may wait on). It wrote nothing, so it is rolled back.
 */
const endUnused = (openTransaction: boolean) => (openTransaction ? ['rollback'] : []);

/**
 * Ends a lock hold in one round trip: sends the held announcements, lets go
 * of the object's advisory lock, and then looks at the queue: whether a
 * command is ready (appended while we held the lock, by someone whose
 * wake-up found the lock taken), and else when the earliest yielded command
 * becomes ready, if any. The look comes after the unlock, as its own
 * statement with its own snapshot: a command that committed before the
 * unlock is then always seen.
 */
export async function announceUnlockAndLook(
  client: pg.PoolClient,
  target: ObjectRef,
  announcements: PendingAnnouncements,
  openTransaction: boolean,
): Promise<{ ready: boolean; nextNotBefore: Date | undefined }> {
  const text = await simpleQueryText(client, [
    ...endUnused(openTransaction),
    ...announcements.take(),
    CompiledQuery.raw('select pg_advisory_unlock(object_lock_key($1, $2))', [target.kind, target.id]),
    CompiledQuery.raw('select * from slipway_queue_look($1, $2)', [target.kind, target.id]),
  ]);
  const results = (await client.query(text)) as unknown as Results<{ ready: boolean; at: Date | null }>[];
  const row = results.at(-1)!.rows[0];
  return { ready: row?.ready === true, nextNotBefore: row?.at ?? undefined };
}

/**
 * Marks a command `running` before its handler calls a driver. Committed
 * asynchronously on purpose: losing this mark in a crash only means the
 * command is found `queued` instead of `running`, and either way it is run
 * again. The outcome commit that follows is fully durable. Announcements
 * held by the drain go first, before the driver call can take its time.
 */
export async function markRunning(
  client: pg.PoolClient,
  commandId: number,
  announcements: PendingAnnouncements,
  openTransaction: boolean,
): Promise<void> {
  const text = await simpleQueryText(client, [
    ...endUnused(openTransaction),
    ...announcements.take(),
    'begin',
    'set local synchronous_commit = off',
    CompiledQuery.raw("update commands set status = 'running', started_at = now() where id = $1", [commandId]),
    'commit',
  ]);
  await client.query(text);
}
