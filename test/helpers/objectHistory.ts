import type { ObjectKind } from '../../migrations/schema.ts';
import type { Db } from '../../src/db/Database.ts';

/** An object's commands, oldest first. */
export const commandsOf = (db: Db, kind: ObjectKind, id: number) =>
  db.selectFrom('commands').selectAll().where('target_kind', '=', kind).where('target_id', '=', id).orderBy('id').execute();

/** An object's state changes from its event log, in order, as `from→to`. */
export const stateEvents = async (db: Db, kind: ObjectKind, id: number) =>
  (
    await db
      .selectFrom('events')
      .select(['from_state', 'to_state'])
      .where('target_kind', '=', kind)
      .where('target_id', '=', id)
      .where('type', '=', 'state')
      .orderBy('id')
      .execute()
  ).map((e) => `${e.from_state}→${e.to_state}`);
