import { sql } from 'kysely';
import type { CommandRow } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import type { Actor } from '../domain/Actor.ts';
import { commandKindSpec } from '../domain/commandKinds.ts';
import { CommandRejectedError, NotFoundError } from '../domain/errors.ts';
import { afterCommit } from '../db/afterCommit.ts';
import { notifyAsynchronously } from '../db/asynchronousCommit.ts';
import { withTransaction } from '../db/withTransaction.ts';
import { COMMANDS_CHANNEL } from '../db/channels.ts';
import { commandNotice } from './announcements.ts';
import { recordEvent } from '../db/recordEvent.ts';
import { findCommand } from '../read/commands.ts';
import { lockObjectInTransaction } from './lockObjectInTransaction.ts';
import type { ObjectRef } from '../db/objectTables.ts';
import { wakeObjects } from './wakeObjects.ts';
import { signalWorkersQuietly } from './wakeSignal.ts';

/**
 * Cancels command `commandId` for a caller, in a transaction (the caller's,
 * if `db` is one): finds it (not found: NotFoundError), lets `mayCancel`
 * refuse it (the API's check that an `own` grant issued it), then
 * cancelCommand. The one path behind the API's cancel, the web UI's button
 * and `slipway command cancel`.
 */
export function cancelCommandById(
  db: Db,
  commandId: number,
  actor: Actor,
  mayCancel: (command: CommandRow) => void = () => undefined,
): Promise<CommandRow> {
  return withTransaction(db, async (trx) => {
    const command = await findCommand(trx, commandId);
    mayCancel(command);
    return cancelCommand(trx, command, actor);
  });
}

/**
 * Cancels a command still queued, in the caller's transaction.
 *
 * Safe against the drain taking the command at the same moment: the cancel
 * takes the object's advisory lock (lockObjectInTransaction), so it runs
 * either entirely before a drain picks the queue head, which then no longer
 * sees the command (it reads only `queued` ones), or entirely after the
 * drain let go, when the command has settled and the cancel is refused. The update is conditional on `queued`
 * all the same. The object is woken again for whatever else is queued (a
 * drain that found the lock taken by us gave up).
 *
 * Only commands a caller may request can be cancelled: an internal command
 * is one object's message to another, and dropping it would strand the
 * conversation (a slot granted and never taken up).
 */
export async function cancelCommand(trx: Db, command: CommandRow, actor: Actor): Promise<CommandRow> {
  const target: ObjectRef = { kind: command.target_kind, id: command.target_id };
  if (commandKindSpec(target.kind, command.kind)?.internal) {
    throw new CommandRejectedError(`command ${command.id} (${command.kind}) is internal to Slipway and cannot be cancelled`, {
      command: command.id,
      kind: command.kind,
    });
  }
  assertQueued(command);
  await lockObjectInTransaction(trx, target, { command: command.id, status: 'queued' });
  const cancelled = await trx
    .updateTable('commands')
    .set({
      status: 'cancelled',
      message: `cancelled by ${actor.issuedBy}${actor.reason ? `: ${actor.reason}` : ''}`,
      finished_at: sql<Date>`now()`,
    })
    .where('id', '=', command.id)
    .where('status', '=', 'queued')
    .returningAll()
    .executeTakeFirst();
  if (!cancelled) {
    const now = await trx.selectFrom('commands').selectAll().where('id', '=', command.id).executeTakeFirst();
    if (!now) throw new NotFoundError('command', command.id);
    assertQueued(now);
    throw new Error(`command ${command.id} is queued but could not be cancelled`);
  }
  await recordEvent(trx, {
    target,
    type: 'command_cancelled',
    message: `${command.kind} (command ${command.id}) cancelled${actor.reason ? `: ${actor.reason}` : ''}`,
    actor,
    commandId: command.id,
  });
  await wakeObjects(trx, [target]);
  // Waiters on the command learn after the commit that it settled (a
  // NOTIFY never travels inside a durable commit: see wakeSignal.ts).
  const notice = JSON.stringify(commandNotice(target, command.id, 'cancelled'));
  afterCommit(trx, `cancelled:${command.id}`, async (db) => {
    await notifyAsynchronously(db, COMMANDS_CHANNEL, notice).catch(() => undefined);
  });
  afterCommit(trx, 'wake', signalWorkersQuietly);
  return cancelled;
}

function assertQueued(command: CommandRow): void {
  if (command.status === 'queued') return;
  throw new CommandRejectedError(
    `command ${command.id} is ${command.status}; only a queued command can be cancelled` +
      (command.status === 'running' ? ' (it is being applied now)' : ''),
    { command: command.id, status: command.status },
  );
}
