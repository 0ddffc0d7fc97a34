import { runAfterCommit } from './afterCommit.ts';
import { afterCommitWasSent } from './connectionFailure.ts';
import type { Db } from './Database.ts';

/**
 * Runs `work` in `db`'s transaction when `db` is one, else in a new one: for
 * work of several statements that must commit together, called both inside
 * a caller's transaction (an API request with an Idempotency-Key, whose
 * record commits with it) and on its own (where a single statement would
 * need no transaction at all; see src/api/respond.ts).
 *
 * A connection that fails once `work` is done failed during the COMMIT: it
 * may have committed, and is thrown as a MayHaveCommittedError. One that
 * fails during `work` rolled the transaction back. After the commit, the
 * work's afterCommit hooks run (the wake-up signal, notices).
 */
export async function withTransaction<T>(db: Db, work: (trx: Db) => Promise<T>): Promise<T> {
  if (db.isTransaction) return work(db);
  let committing = false;
  let transaction: Db | undefined;
  let result: T;
  try {
    result = await db.transaction().execute(async (trx) => {
      transaction = trx;
      const done = await work(trx);
      committing = true;
      return done;
    });
  } catch (error) {
    throw committing ? afterCommitWasSent(error) : error;
  }
  await runAfterCommit(transaction!, db);
  return result;
}
