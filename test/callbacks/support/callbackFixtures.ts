import { sql } from 'kysely';
import type { CallbackStatus } from '../../../migrations/schema.ts';
import { attachCallback } from '../../../src/callbacks/attachCallback.ts';
import { DEFAULT_ALLOWED_HOSTS, parseAllowedHosts } from '../../../src/domain/allowedHosts.ts';
import type { Db } from '../../../src/db/Database.ts';
import { withTransaction } from '../../../src/db/withTransaction.ts';
import { appendInTransaction } from '../../../src/queue/appendCommand.ts';
import { readCallbacks, type CallbackView } from '../../../src/read/callbacks.ts';
import { tester } from '../../concurrency/support/fixtures.ts';
import { waitFor } from '../../helpers/waitFor.ts';

export const TEST_SECRET = 'test-callback-secret-0123456789abcdef';

/** The default allow-list: loopback only. */
export const LOOPBACK = parseAllowedHosts(DEFAULT_ALLOWED_HOSTS);

/** Appends a release with a callback, in one transaction, as the API does. */
export function releaseWithCallback(db: Db, leaseId: number, url: string) {
  return withTransaction(db, async (trx) => {
    const { command } = await appendInTransaction(
      trx,
      { target: { kind: 'lease', id: leaseId }, kind: 'release', actor: tester },
      { fromOutside: true },
    );
    const callback = await attachCallback(trx, command.id, url, LOOPBACK);
    return { command, callback };
  });
}

/** Registers a callback on an existing command, in a transaction of its own (its after-commit work included, as the API's). */
export function attachLater(db: Db, commandId: number, url: string) {
  return withTransaction(db, (trx) => attachCallback(trx, commandId, url, LOOPBACK));
}

/** Waits until the command's callback (its only one unless `url` picks one) reaches one of `statuses`. */
export function waitForCallback(db: Db, commandId: number, statuses: readonly CallbackStatus[], url?: string): Promise<CallbackView> {
  return waitFor(`command ${commandId}'s callback to be ${statuses.join(' or ')}`, async () => {
    const callback = (await readCallbacks(db, commandId)).find((c) => url === undefined || c.url === url);
    return callback && statuses.includes(callback.status) ? callback : undefined;
  });
}

/** deliver_callback jobs in graphile-worker's queue (run jobs are deleted). */
export async function deliveryJobs(db: Db): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    select count(*)::int as n from graphile_worker.jobs where task_identifier = 'deliver_callback'
  `.execute(db);
  return rows[0]!.n;
}
