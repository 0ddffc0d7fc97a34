import { sql } from 'kysely';
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

  let objectUpdate;
  if (outcome.to !== undefined || outcome.set !== undefined) {
    if (outcome.to !== undefined && !canTransition(target.kind, object.state, outcome.to)) {
      throw new Error(`${target.kind} ${target.id}: ${object.state} → ${outcome.to} is not in the state table`);
    }
    objectUpdate = trx
      .updateTable(OBJECT_TABLE[target.kind] as 'leases')
      .set({
        ...(outcome.set as object),
        ...(outcome.to !== undefined ? { state: outcome.to } : {}),
        version: object.version + 1,
        updated_at: sql<Date>`now()`,
      })
      .where('id', '=', target.id)
      .where('version', '=', object.version)
      .returningAll();
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
  const updated = (await settleCommand(trx, command, outcome, events, supersedes, objectUpdate)) as Row | undefined;
  if (objectUpdate && !updated) {
    throw new VersionConflictError(`${target.kind} ${target.id} changed while command ${command.id} was applied`);
  }

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

export type { ObjectKind };
