import { sql } from 'kysely';
import type { Db } from '../db/Database.ts';
import { CommandRejectedError } from '../domain/errors.ts';
import { describeObject, type ObjectRef } from '../db/objectTables.ts';

/** How long a writer from outside waits for a drain busy with the object before it gives up (and says so). */
const LOCK_WAIT_MS = 5000;

/**
 * Makes the caller the object's single writer until its transaction ends: it
 * takes the object's advisory lock at transaction level, the key the drain
 * holds at session level, so no drain is mid-command meanwhile and none
 * starts. For the rare writes that are not commands (cancelling a queued
 * command, changing a blueprint's settings). A drain busy with the object
 * for longer than a few seconds makes this a refusal rather than a hang.
 *
 * A drain that finds the lock taken gives up at once, trusting the holder to
 * look at the queue again; a transaction is no drain, so the caller must
 * wake the object (wakeObjects) before it commits.
 */
export async function lockObjectInTransaction(trx: Db, target: ObjectRef, details: Record<string, unknown> = {}): Promise<void> {
  await sql`select set_config('lock_timeout', ${`${LOCK_WAIT_MS}ms`}, true)`.execute(trx);
  try {
    await sql`select pg_advisory_xact_lock(object_lock_key(${target.kind}, ${target.id}))`.execute(trx);
  } catch (error) {
    if ((error as { code?: string }).code !== '55P03') throw error;
    throw new CommandRejectedError(`${describeObject(target)} is busy applying commands; retry shortly`, { ...details, busy: true });
  }
  await sql`select set_config('lock_timeout', '0', true)`.execute(trx);
}
