import { sql } from 'kysely';
import type { CallbackRow } from '../../migrations/schema.ts';
import { afterCommit } from '../db/afterCommit.ts';
import type { Db } from '../db/Database.ts';
import { NotFoundError } from '../domain/errors.ts';
import type { AllowedHosts } from '../domain/allowedHosts.ts';
import { checkCallbackUrl } from './CallbackRequest.ts';
import { dispatchCallbacksQuietly } from './dispatchCallbacks.ts';
import { lockUnsettledTree } from './lockUnsettledTree.ts';

/**
 * Records that `url` wants the final status of a command, in the caller's
 * transaction (the API calls it in the one that appends the command, so a
 * refused URL leaves neither behind). The URL is checked against the
 * allow-list first; an InvalidInputError says what would be accepted.
 *
 * The callback fires once the command and every command it caused have
 * settled. A request that was coalesced into a command already queued or
 * running gets that command's outcome; a command whose tree has already
 * settled has its delivery queued at once. The same URL on the same command
 * twice is one callback.
 *
 * The transaction must be READ COMMITTED (PostgreSQL's default): the check
 * below relies on each statement reading a fresh snapshot.
 */
export async function attachCallback(trx: Db, commandId: number, url: string, allowed: AllowedHosts): Promise<CallbackRow> {
  const checkedUrl = checkCallbackUrl(url, allowed);
  const command = await trx.selectFrom('commands').select(['id', 'coalesced_into']).where('id', '=', commandId).executeTakeFirst();
  if (!command) throw new NotFoundError('command', commandId);
  const rootId = command.coalesced_into ?? command.id;

  const inserted = await trx
    .insertInto('command_callbacks')
    .values({ command_id: rootId, url: checkedUrl })
    .onConflict((oc) => oc.columns(['command_id', 'url']).doNothing())
    .returningAll()
    .executeTakeFirst();
  if (!inserted) {
    return trx.selectFrom('command_callbacks').selectAll().where('command_id', '=', rootId).where('url', '=', checkedUrl).executeTakeFirstOrThrow();
  }
  if (await lockUnsettledTree(trx, rootId)) return inserted;
  await sql`select queue_callback_delivery(${inserted.id})`.execute(trx);
  // The delivery's job is queued after the commit (see dispatchCallbacks.ts).
  if (trx.isTransaction) afterCommit(trx, 'dispatch callbacks', dispatchCallbacksQuietly);
  else await dispatchCallbacksQuietly(trx);
  return trx.selectFrom('command_callbacks').selectAll().where('id', '=', inserted.id).executeTakeFirstOrThrow();
}
