import { CompiledQuery, type RawBuilder, sql } from 'kysely';
import type { Db } from './Database.ts';
import { PREPARED_MARK } from './PreparingClient.ts';

/** The setting, as a select-list expression, that makes the transaction it runs in commit without waiting for its WAL flush. */
export const ASYNCHRONOUS_COMMIT = "set_config('synchronous_commit', 'off', true)";

/**
 * Runs `select <expression>` as a transaction of its own that commits without
 * waiting for its WAL flush (synchronous_commit off for that transaction
 * only), and answers its one row. For work after a durable commit that may
 * be lost in a crash because a durable row still records it: a NOTIFY
 * (PostgreSQL holds a database-wide lock from a notifying commit through its
 * flush), or queueing a callback's job. Call it outside any transaction: one
 * statement is its own transaction, and the setting lasts until its commit.
 */
export async function selectAsynchronously<T>(db: Db, expression: RawBuilder<T>): Promise<T> {
  // Prepared on each connection (PreparingClient): the wake-up signal after every append is one.
  const { rows } = await sql<{ value: T }>`${sql.raw(PREPARED_MARK)}
    select ${expression} as value from (select ${sql.raw(ASYNCHRONOUS_COMMIT)}) as asynchronous
  `.execute(db);
  return rows[0]!.value;
}

/**
 * A NOTIFY on `channel` with `payload`, committed as selectAsynchronously
 * commits. Its text is fixed and prepared, so a signal costs no query
 * building: the wake-up signal follows every append (or batch of them) an
 * API server makes, and building it with Kysely each time was about a
 * hundredth of the server's CPU on a stream of releases.
 */
export async function notifyAsynchronously(db: Db, channel: string, payload: string): Promise<void> {
  await db.executeQuery(CompiledQuery.raw(NOTIFY_TEXT, [channel, payload]));
}
const NOTIFY_TEXT = `${PREPARED_MARK} select pg_notify($1, $2) as value from (select ${ASYNCHRONOUS_COMMIT}) as asynchronous`;
