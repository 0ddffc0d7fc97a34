import type { Db } from '../db/Database.ts';
import { NotFoundError } from '../domain/errors.ts';
import { OBJECT_TABLE, type ObjectRef } from '../db/objectTables.ts';

/** The current state of any object. */
export async function readObjectState(db: Db, ref: ObjectRef): Promise<string> {
  const row = await db
    .selectFrom(OBJECT_TABLE[ref.kind] as 'leases')
    .select('state')
    .where('id', '=', ref.id)
    .executeTakeFirst();
  if (!row) throw new NotFoundError(ref.kind, ref.id);
  return row.state;
}

export interface Transition {
  readonly eventId: number;
  readonly from: string | null;
  readonly to: string | null;
}

/**
 * The object's state changes from its event log, from the moment a command
 * was queued on: every transition exactly once, in order, where reading the
 * state itself could skip one that came and went between two reads.
 */
export async function readTransitionsSince(db: Db, ref: ObjectRef, commandId: number): Promise<Transition[]> {
  const rows = await db
    .selectFrom('events')
    .select(['id', 'from_state', 'to_state'])
    .where('target_kind', '=', ref.kind)
    .where('target_id', '=', ref.id)
    .where('type', '=', 'state')
    .where('created_at', '>=', (eb) => eb.selectFrom('commands').select('created_at').where('id', '=', commandId))
    .orderBy('id')
    .execute();
  return rows.map((row) => ({ eventId: row.id, from: row.from_state, to: row.to_state }));
}
