import { sql } from 'kysely';
import type pg from 'pg';
import type { CommandRow, ObjectKind } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import { commandKindSpec } from '../domain/commandKinds.ts';
import { canTransition } from '../domain/lifecycle.ts';
import type { EventInput } from '../objects/recordEvent.ts';
import { appendInTransaction } from '../queue/appendCommand.ts';
import { OBJECT_TABLE, type ObjectRef } from '../queue/objectTables.ts';
import { wakeObjects, type WakeTarget } from '../queue/wakeObjects.ts';
import type { Outcome } from './Handler.ts';
import { settleCommand } from './sql/settleCommand.ts';

/** Another writer changed the object under us: the single-writer rule was broken. */
export class VersionConflictError extends Error {
  override name = 'VersionConflictError';
}

/** Channel on which every settled or yielded command is announced (for waiters). */
export const COMMANDS_CHANNEL = 'slipway_commands';

/**
 * Commits one applied command, in the caller's transaction: the object's new
 * state and columns (only if its version is still the one we read), the
 * command's status, the event rows, the cancellation of queued work this
 * command supersedes, and the follow-up commands with their wake-ups.
 * Returns the object's row as it now is (the drain carries it to the next
 * command), or undefined when the outcome left the row alone.
 */
export async function commitOutcome<Row extends { state: string; version: number }>(
  trx: Db,
  target: ObjectRef,
  object: Row,
  command: CommandRow,
  outcome: Outcome,
): Promise<Row | undefined> {
  const actor = { issuedBy: command.issued_by, source: command.source };
  const events: EventInput[] = [];

  let updated: Row | undefined;
  if (outcome.to !== undefined || outcome.set !== undefined) {
    if (outcome.to !== undefined && !canTransition(target.kind, object.state, outcome.to)) {
      throw new Error(`${target.kind} ${target.id}: ${object.state} → ${outcome.to} is not in the state table`);
    }
    updated = (await trx
      .updateTable(OBJECT_TABLE[target.kind] as 'leases')
      .set({
        ...(outcome.set as object),
        ...(outcome.to !== undefined ? { state: outcome.to } : {}),
        version: object.version + 1,
        updated_at: sql<Date>`now()`,
      })
      .where('id', '=', target.id)
      .where('version', '=', object.version)
      .returningAll()
      .executeTakeFirst()) as Row | undefined;
    if (!updated) {
      throw new VersionConflictError(`${target.kind} ${target.id} changed while command ${command.id} was applied`);
    }
    if (outcome.to !== undefined && outcome.to !== object.state) {
      events.push({
        target,
        type: 'state',
        fromState: object.state,
        toState: outcome.to,
        message: outcome.message,
        actor,
        commandId: command.id,
      });
    }
  }
  for (const e of outcome.events ?? []) {
    events.push({ target, type: e.type, message: e.message, data: e.data, actor, commandId: command.id });
  }
  const supersedes = outcome.status === 'done' ? (commandKindSpec(target.kind, command.kind)?.supersedes ?? []) : [];
  await settleCommand(trx, command, outcome, events, supersedes);

  // Follow-ups are appended first and their objects woken in one call at the
  // end, so every commit locks wake-up jobs in the same (key) order.
  const wakes: WakeTarget[] = [];
  for (const followUp of outcome.followUps ?? []) {
    const notBefore = followUp.notBeforeMs ? new Date(Date.now() + followUp.notBeforeMs) : undefined;
    await appendInTransaction(
      trx,
      {
        target: followUp.target,
        kind: followUp.kind,
        payload: followUp.payload,
        causedBy: command.id,
        actor: { issuedBy: command.issued_by, source: 'system', reason: followUp.reason, requestId: command.request_id },
        ...(notBefore ? { notBefore } : {}),
      },
      { fromOutside: false, wake: false },
    );
    // The drain will see commands for its own object before it lets go.
    const toSelf = followUp.target.kind === target.kind && followUp.target.id === target.id;
    if (!toSelf) wakes.push({ ...followUp.target, runAt: notBefore });
  }
  await wakeObjects(trx, wakes);
  return updated;
}

/**
 * Commits the outcome transaction, then tells waiters (CLI, API) that the
 * command settled or yielded: one round trip, two transactions. The notice is
 * sent after the outcome's commit, not inside it: NOTIFY takes a
 * database-wide lock that is held until its transaction's commit is flushed,
 * which would serialise the commits of every drain. Its own transaction
 * commits asynchronously for the same reason; a waiter that misses a notice
 * (the server crashed in between) finds the outcome on its fallback read.
 */
export async function commitAndAnnounce(
  client: pg.PoolClient,
  target: ObjectRef,
  commandId: number,
  status: Outcome['status'],
): Promise<void> {
  const notice = { id: commandId, target: `${target.kind}:${target.id}`, status: status === 'yield' ? 'queued' : status };
  await client.query(
    `commit; begin; set local synchronous_commit = off;
     select pg_notify('${COMMANDS_CHANNEL}', ${client.escapeLiteral(JSON.stringify(notice))}); commit`,
  );
}

export type { ObjectKind };
