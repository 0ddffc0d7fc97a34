import type { Db } from './Database.ts';

/**
 * Runs `work` in `db`'s transaction when `db` is one, else in a new one: for
 * work of several statements that must commit together, called both inside
 * a caller's transaction (an API request with an Idempotency-Key, whose
 * record commits with it) and on its own (where a single statement would
 * need no transaction at all; see src/api/respond.ts).
 */
export function withTransaction<T>(db: Db, work: (trx: Db) => Promise<T>): Promise<T> {
  return db.isTransaction ? work(db) : db.transaction().execute(work);
}
