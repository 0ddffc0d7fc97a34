import type { CallbackAttemptRow, CallbackRow } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';

/** A callback on a command, with every delivery attempt so far (oldest first). */
export type CallbackView = CallbackRow & { readonly attempt_log: CallbackAttemptRow[] };

/** The callbacks registered on one command, oldest first; empty when it has none. */
export async function readCallbacks(db: Db, commandId: number): Promise<CallbackView[]> {
  const callbacks = await db.selectFrom('command_callbacks').selectAll().where('command_id', '=', commandId).orderBy('id').execute();
  if (callbacks.length === 0) return [];
  const attempts = await db
    .selectFrom('callback_attempts')
    .selectAll()
    .where(
      'callback_id',
      'in',
      callbacks.map((c) => c.id),
    )
    .orderBy('callback_id')
    .orderBy('attempt')
    .execute();
  return callbacks.map((callback) => ({
    ...callback,
    attempt_log: attempts.filter((a) => a.callback_id === callback.id),
  }));
}
