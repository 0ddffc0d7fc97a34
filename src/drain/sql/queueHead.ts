import { CompiledQuery } from 'kysely';
import type pg from 'pg';
import type { BlueprintRow, CommandRow } from '../../../migrations/schema.ts';
import { simpleQueryText } from '../../db/preparedText.ts';
import { DRAIN_TASK, OBJECT_TABLE, type ObjectRef } from '../../queue/objectTables.ts';
import { asVersionConflict, COMMANDS_CHANNEL, type OutcomeStatements } from '../commitOutcome.ts';
import type { PendingAnnouncements } from './announcements.ts';
import { lockObjectVersionQuery } from './objectRow.ts';

// The queue head of one object (slipway_queue_head, migrations/0010). A
// `running` command comes first: finding one means the previous lock holder
// died mid-command, so it is repeated (driver calls are at least once). Then
// preempting kinds (release, reclaim) ahead of older work, then everything
// else in order. Preemption is about order only: a yielded release waits out
// its own not-before like anything else (else a release whose driver keeps
// failing, or one this worker cannot run, would be retried in a hot loop),
// and a yielded allocation is not ready, so it never holds a release up.
//
// The head is read by slipway_drain_start and slipway_drain_next
// (migrations/0012), which also take and give back the object's advisory
// lock: no row means the drain holds no lock. Each goes in one simple query
// with the statements around it, as prepared statements (simpleQueryText).

type Results<T> = pg.QueryResult<T & pg.QueryResultRow>;

/** Where a lock hold stands after a round trip: the next command, or none and the lock given back. */
export interface HoldStep<Row> {
  /** The object's row as the outcome left it (absent if the outcome did not write it). */
  readonly object: Row | undefined;
  /** The next ready command, the lock still held; undefined: the hold is over, the lock given back, the notices sent. */
  readonly head: CommandRow | undefined;
}

const drainNextQuery = (target: ObjectRef, preempting: readonly string[], notices: string) =>
  CompiledQuery.raw('select * from slipway_drain_next($1, $2, $3::text[], $4, $5, $6::jsonb)', [
    target.kind,
    target.id,
    preempting,
    DRAIN_TASK[target.kind],
    COMMANDS_CHANNEL,
    notices,
  ]);

/**
 * Starts a lock hold in one round trip: tries the object's session advisory
 * lock and reads its first ready command (slipway_drain_start), then the
 * object's row and, for a lease or resource, its blueprint. Each is its own
 * statement, so the reads see everything committed before the lock was
 * taken. No head: the lock was taken by another drain (which looks at the
 * queue again as it lets go), or nothing was ready (and it was given back).
 * No transaction is left open: the first outcome opens its own.
 */
export async function startHold<Row>(
  client: pg.PoolClient,
  target: ObjectRef,
  preempting: readonly string[],
): Promise<{ head: CommandRow | undefined; object: Row | undefined; blueprint: BlueprintRow | undefined }> {
  const table = OBJECT_TABLE[target.kind];
  const text = await simpleQueryText(client, [
    CompiledQuery.raw('select * from slipway_drain_start($1, $2, $3::text[], $4)', [target.kind, target.id, preempting, DRAIN_TASK[target.kind]]),
    CompiledQuery.raw(`select * from ${table} where id = $1`, [target.id]),
    ...(target.kind === 'blueprint'
      ? []
      : [CompiledQuery.raw(`select * from blueprints where id = (select blueprint_id from ${table} where id = $1)`, [target.id])]),
  ]);
  const [head, object, ofBlueprint] = (await client.query(text)) as unknown as [Results<CommandRow>, Results<Row>, Results<BlueprintRow> | undefined];
  return { head: head.rows[0], object: object.rows[0], blueprint: ofBlueprint?.rows[0] };
}

/**
 * Commits one command's outcome and gets the next one going, in ONE round
 * trip: unless the decision already opened it (see ObjectDrain), `begin` and
 * the object's row lock with its version check (the outcome's own update of
 * the row, when it makes one, is both); the outcome's statements
 * (see outcomeStatements); the commit; and slipway_drain_next, which reads
 * the next ready command or ends the hold, sending the held notices and
 * this command's own (`announcements`, which keeps them while the hold goes
 * on).
 *
 * The checks fail inside the query, so the commit after them never runs
 * (PostgreSQL abandons the rest of a simple query at its first error), no
 * notice goes out, and the caller rolls back. Nothing after the commit can
 * fail for a reason worth retrying.
 */
export async function commitOutcomeAndContinue<Row>(
  client: pg.PoolClient,
  target: ObjectRef,
  preempting: readonly string[],
  transaction: { open: boolean; version: number },
  outcome: OutcomeStatements,
  announcements: PendingAnnouncements,
  notice: string,
): Promise<HoldStep<Row>> {
  // An outcome that writes the object's row starts with that version-checked
  // UPDATE, which takes the same row lock and makes the same check.
  const opening = transaction.open ? [] : ['begin', ...(outcome.objectUpdate ? [] : [lockObjectVersionQuery(target, transaction.version)])];
  const statements = [...(outcome.objectUpdate ? [outcome.objectUpdate] : []), ...outcome.rest];
  const notices = announcements.withNotice(notice);
  const text = await simpleQueryText(client, [...opening, ...statements, 'commit', drainNextQuery(target, preempting, notices)]);
  let results: Results<unknown>[];
  try {
    results = (await client.query(text)) as unknown as Results<unknown>[];
  } catch (error) {
    throw asVersionConflict(error);
  }
  const head = (results.at(-1) as Results<CommandRow>).rows[0];
  announcements.keep(notice, head !== undefined);
  return {
    object: outcome.objectUpdate ? (results[opening.length] as Results<Row>).rows[0] : undefined,
    head,
  };
}

/**
 * Ends or goes on with a lock hold after a command this worker cannot run
 * (a kind or version it does not know): `statements` note that on the
 * command and push its not-before past the hand-off time, in their own
 * transaction; then slipway_drain_next, as after a commit. So the hold goes
 * on with the next ready command, if any, and the object is woken for the
 * one left behind when it is due, by then perhaps for another worker.
 */
export async function handOffAndContinue<Row>(
  client: pg.PoolClient,
  target: ObjectRef,
  preempting: readonly string[],
  statements: readonly CompiledQuery[],
  announcements: PendingAnnouncements,
): Promise<HoldStep<Row>> {
  const text = await simpleQueryText(client, [...statements, drainNextQuery(target, preempting, announcements.withNotice(undefined))]);
  const results = (await client.query(text)) as unknown as Results<CommandRow>[];
  const head = results.at(-1)!.rows[0];
  announcements.keep(undefined, head !== undefined);
  return { object: undefined, head };
}

/**
 * Marks a command `running` before its handler calls a driver, ending the
 * outcome transaction the decision may have opened (it wrote nothing, so it
 * is rolled back). Committed asynchronously on purpose: losing this mark in
 * a crash only means the command is found `queued` instead of `running`, and
 * either way it is run again. The outcome commit that follows is fully
 * durable. Notices held by the drain go in the same transaction, before the
 * driver call can take its time.
 */
export async function markRunning(
  client: pg.PoolClient,
  commandId: number,
  announcements: PendingAnnouncements,
  openTransaction: boolean,
): Promise<void> {
  const text = await simpleQueryText(client, [
    ...(openTransaction ? ['rollback'] : []),
    'begin',
    'set local synchronous_commit = off',
    ...announcements.take(),
    CompiledQuery.raw("update commands set status = 'running', started_at = now() where id = $1", [commandId]),
    'commit',
  ]);
  await client.query(text);
}
