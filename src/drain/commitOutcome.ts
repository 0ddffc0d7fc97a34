import { sql } from 'kysely';
import type { CommandRow, ObjectKind } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import { commandKindSpec } from '../domain/commandKinds.ts';
import { canTransition } from '../domain/lifecycle.ts';
import { recordEvents, type EventInput } from '../objects/recordEvent.ts';
import { appendInTransaction } from '../queue/appendCommand.ts';
import { OBJECT_TABLE, type ObjectRef } from '../queue/objectTables.ts';
import { wakeObjects, type WakeTarget } from '../queue/wakeObjects.ts';
import type { Outcome } from './Handler.ts';

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
 */
export async function commitOutcome(
  trx: Db,
  target: ObjectRef,
  object: { state: string; version: number },
  command: CommandRow,
  outcome: Outcome,
): Promise<void> {
  const actor = { issuedBy: command.issued_by, source: command.source };
  const events: EventInput[] = [];

  if (outcome.to !== undefined || outcome.set !== undefined) {
    if (outcome.to !== undefined && !canTransition(target.kind, object.state, outcome.to)) {
      throw new Error(`${target.kind} ${target.id}: ${object.state} → ${outcome.to} is not in the state table`);
    }
    const result = await trx
      .updateTable(OBJECT_TABLE[target.kind] as 'leases')
      .set({
        ...(outcome.set as object),
        ...(outcome.to !== undefined ? { state: outcome.to } : {}),
        version: object.version + 1,
        updated_at: sql<Date>`now()`,
      })
      .where('id', '=', target.id)
      .where('version', '=', object.version)
      .executeTakeFirst();
    if (result.numUpdatedRows !== 1n) {
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
  await recordEvents(trx, events);

  if (outcome.status === 'yield') {
    await trx
      .updateTable('commands')
      .set({
        status: 'queued',
        message: outcome.message,
        attempts: sql<number>`attempts + 1`,
        not_before: sql<Date>`now() + make_interval(secs => ${(outcome.retryInMs ?? 1000) / 1000})`,
      })
      .where('id', '=', command.id)
      .execute();
  } else {
    await trx
      .updateTable('commands')
      .set({
        status: outcome.status,
        message: outcome.message,
        finished_at: sql<Date>`now()`,
        started_at: sql<Date>`coalesce(started_at, now())`,
      })
      .where('id', '=', command.id)
      .execute();
    const supersedes = commandKindSpec(target.kind, command.kind)?.supersedes ?? [];
    if (outcome.status === 'done' && supersedes.length > 0) {
      await trx
        .updateTable('commands')
        .set({
          status: 'cancelled',
          message: `superseded by ${command.kind} (command ${command.id})`,
          finished_at: sql<Date>`now()`,
        })
        .where('target_kind', '=', target.kind)
        .where('target_id', '=', target.id)
        .where('status', '=', 'queued')
        .where('kind', 'in', [...supersedes])
        .execute();
    }
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
}

/**
 * Tells waiters (CLI, API) that a command settled or yielded. Sent after the
 * outcome's commit, not inside it: NOTIFY takes a database-wide lock that is
 * held until its transaction's commit is flushed, which would serialise the
 * commits of every drain. A waiter that misses a notice (this process died
 * between the two) finds the outcome on its fallback read.
 */
export async function announceOutcome(db: Db, target: ObjectRef, commandId: number, status: Outcome['status']): Promise<void> {
  const notice = { id: commandId, target: `${target.kind}:${target.id}`, status: status === 'yield' ? 'queued' : status };
  await sql`select pg_notify(${COMMANDS_CHANNEL}, ${JSON.stringify(notice)})`.execute(db);
}

export type { ObjectKind };
