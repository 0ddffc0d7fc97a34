import type { ObjectKind } from '../../migrations/schema.ts';
import { commandKindSpec } from '../domain/commandKinds.ts';
import { type CommandHandler, joinsRuns, type Outcome } from './Handler.ts';

/**
 * Runs: the commands of one object a step decides one after another (see
 * DrainLane). The head is decided as always; each command after it joins
 * the step only while both it and the one before are of handlers marked
 * `inRuns` (or settled by the state table, which needs no handler; the
 * lane checks the one joining, runGoesOnAfter the one before), so a
 * decision never reads what the step's commit has not written yet.
 */

/**
 * Whether the run may go on after a command decided with `outcome` by
 * `handler` (none: the state table or its payload settled it).
 */
export function runGoesOnAfter(target: ObjectKind, kind: string, handler: CommandHandler<ObjectKind> | undefined, outcome: Outcome): boolean {
  if (handler && !joinsRuns(handler)) return false;
  // A yield leaves the command queued: what follows must not overtake it.
  if (outcome.status === 'yield') return false;
  // A command done cancels the queued kinds it supersedes, which may be
  // further along this very run.
  return outcome.status !== 'done' || (commandKindSpec(target, kind)?.supersedes ?? []).length === 0;
}

/**
 * The object's row as an outcome leaves it, for the next decision of its
 * run: what the commit's update will write (the version raised only if it
 * makes one). The commit's RETURNING replaces it.
 */
export function rowAfter<Row extends { state: string; version: number }>(row: Row, outcome: Outcome): Row {
  if (outcome.to === undefined && outcome.set === undefined) return row;
  return { ...row, ...(outcome.set as object), state: outcome.to ?? row.state, version: row.version + 1 };
}
