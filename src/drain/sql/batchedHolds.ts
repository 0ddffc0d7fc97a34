import { CompiledQuery } from 'kysely';
import type pg from 'pg';
import type { BlueprintRow, CommandRow, ObjectKind } from '../../../migrations/schema.ts';
import type { Db } from '../../db/Database.ts';
import { simpleQueryText } from '../../db/preparedText.ts';
import { DRAIN_TASK, OBJECT_TABLE, type ObjectRef } from '../../queue/objectTables.ts';
import { type WakeTarget, wakeObjectsQuery } from '../../queue/wakeObjects.ts';
import { PREEMPTING } from '../commandStep.ts';
import { COMMANDS_CHANNEL, followUpStatements, settlement } from '../commitOutcome.ts';
import type { Outcome } from '../Handler.ts';
import { PendingAnnouncements } from './announcements.ts';
import { settleCommands } from './settleCommand.ts';

// The statements of many objects' lock holds on one connection, for
// DrainBatcher: the set-based functions of migrations/0013_batched_drain.ts.
// Every step of the batch is one round trip: the outcomes of the objects
// that had a command ready, committed together, and their next commands
// read; the locks of the objects handed to the per-object drain given back;
// the holds of newly arrived objects started.

type Results = pg.QueryResult<pg.QueryResultRow>;

/** The kinds a batch can hold: those with a blueprint of their own, read with them. */
export type BatchedKind = Exclude<ObjectKind, 'blueprint'>;

/** One object's command applied in a batch: an outcome that writes at most the object's state. */
export interface BatchedOutcome<Row> {
  readonly target: ObjectRef;
  readonly object: Row;
  readonly command: CommandRow;
  readonly outcome: Outcome;
}

/** What one step's round trip brought back. */
export interface BatchStep<Row> {
  /** The rows the outcomes changed, as they now are. */
  readonly updated: readonly Row[];
  /** The next ready command of each committed object whose hold goes on (the others' locks are given back). */
  readonly nextHeads: readonly CommandRow[];
  /** The first command of each newly arrived object whose lock was taken (the others were not locked, or had nothing ready). */
  readonly startedHeads: readonly CommandRow[];
  /** The newly arrived objects' rows, and their blueprints. */
  readonly startedRows: readonly Row[];
  readonly startedBlueprints: readonly BlueprintRow[];
}

/**
 * Runs one step of a batch: `committed` in one transaction, then the next
 * command of each; the locks of `handedOff` given back; the holds of
 * `arriving` started (ids distinct, none already locked on this connection).
 *
 * The commit's checks fail inside the query (the version check SW001, a
 * follow-up's missing target SW002), so the commit never runs and neither
 * does anything after it; the caller then discards the connection, which
 * frees every lock it held, so a failed step leaves no lock behind whatever
 * part of it ran.
 */
export async function runBatchStep<Row extends { id: number; state: string; version: number }>(
  client: pg.PoolClient,
  db: Db,
  kind: BatchedKind,
  step: { committed: readonly BatchedOutcome<Row>[]; handedOff: readonly number[]; arriving: readonly number[] },
): Promise<BatchStep<Row>> {
  const statements: (string | CompiledQuery)[] = [];
  const at = (query: string | CompiledQuery) => statements.push(query) - 1;
  const table = OBJECT_TABLE[kind];
  let updatedAt = -1;
  let nextAt = -1;
  if (step.committed.length > 0) {
    const { committed } = step;
    const changes = committed.filter((c) => c.outcome.to !== undefined);
    const appends: CompiledQuery[] = [];
    const wakes: WakeTarget[] = [];
    for (const c of committed) {
      const followUps = followUpStatements(db, c.target, c.command, c.outcome);
      appends.push(...followUps.appends);
      wakes.push(...followUps.wakes);
    }
    at('begin');
    // Every row locked first, in wake-up job key order, with its version checked.
    at(
      CompiledQuery.raw('select slipway_lock_object_versions($1, $2::bigint[], $3::int[])', [
        kind,
        committed.map((c) => c.object.id),
        committed.map((c) => c.object.version),
      ]),
    );
    if (changes.length > 0) {
      updatedAt = at(
        CompiledQuery.raw(
          `update ${table} as o set state = u.state, version = o.version + 1, updated_at = now()
           from unnest($1::bigint[], $2::int[], $3::text[]) as u(id, version, state)
           where o.id = u.id and o.version = u.version
           returning o.*`,
          [changes.map((c) => c.object.id), changes.map((c) => c.object.version), changes.map((c) => c.outcome.to!)],
        ),
      );
    }
    at(settleCommands(committed.map((c) => settlement(c.target, c.object, c.command, c.outcome))).compile(db));
    statements.push(...appends);
    if (wakes.length > 0) at(wakeObjectsQuery(wakes).compile(db));
    at('commit');
    const notices = JSON.stringify(committed.map((c) => PendingAnnouncements.notice(c.target, c.command.id, c.outcome.status)));
    nextAt = at(
      CompiledQuery.raw('select * from slipway_drain_next_many($1, $2::bigint[], $3::text[], $4, $5, $6::jsonb)', [
        kind,
        committed.map((c) => c.object.id),
        PREEMPTING[kind],
        DRAIN_TASK[kind],
        COMMANDS_CHANNEL,
        notices,
      ]),
    );
  }
  if (step.handedOff.length > 0) {
    at(CompiledQuery.raw('select pg_advisory_unlock(object_lock_key($1, i)) from unnest($2::bigint[]) as i', [kind, step.handedOff]));
  }
  let startAt = -1;
  if (step.arriving.length > 0) {
    startAt = at(
      CompiledQuery.raw('select * from slipway_drain_start_many($1, $2::bigint[], $3::text[], $4)', [
        kind,
        step.arriving,
        PREEMPTING[kind],
        DRAIN_TASK[kind],
      ]),
    );
    at(CompiledQuery.raw(`select * from ${table} where id = any($1::bigint[])`, [step.arriving]));
    at(CompiledQuery.raw(`select * from blueprints where id in (select blueprint_id from ${table} where id = any($1::bigint[]))`, [step.arriving]));
  }
  const raw = (await client.query(await simpleQueryText(client, statements))) as unknown as Results | Results[];
  const results = Array.isArray(raw) ? raw : [raw];
  const rows = <T>(index: number) => (index < 0 ? [] : (results[index]!.rows as T[]));
  return {
    updated: rows<Row>(updatedAt),
    nextHeads: rows<CommandRow>(nextAt),
    startedHeads: rows<CommandRow>(startAt),
    startedRows: rows<Row>(startAt < 0 ? -1 : startAt + 1),
    startedBlueprints: rows<BlueprintRow>(startAt < 0 ? -1 : startAt + 2),
  };
}
