import { sql } from 'kysely';
import type { Db } from '../../db/Database.ts';

/**
 * An active resource of the blueprint that shows a free slot, as of this
 * read. Only a hint: the resource, single writer of its slots, decides when
 * the `acquire` reaches it. Random rather than "fullest first" so that
 * concurrent leases spread over resources instead of queueing acquires on
 * one of them and collecting refusals.
 */
export async function resourceWithFreeSlot(trx: Db, blueprintId: number): Promise<number | undefined> {
  const row = await trx
    .selectFrom('resources')
    .select('id')
    .where('blueprint_id', '=', blueprintId)
    .where('state', '=', 'active')
    .whereRef('used_slots', '<', 'capacity')
    .orderBy(sql`random()`)
    .limit(1)
    .executeTakeFirst();
  return row?.id;
}

/** Whether any lease waits at the blueprint for capacity (cheaper than counting them). */
export async function hasWaitingLeases(trx: Db, blueprintId: number): Promise<boolean> {
  const row = await trx.selectFrom('blueprint_waiters').select('lease_id').where('blueprint_id', '=', blueprintId).limit(1).executeTakeFirst();
  return row !== undefined;
}

/** How many leases wait at the blueprint for capacity. */
export async function waitingLeaseCount(trx: Db, blueprintId: number): Promise<number> {
  const row = await trx
    .selectFrom('blueprint_waiters')
    .select(sql<number>`count(*)::int`.as('n'))
    .where('blueprint_id', '=', blueprintId)
    .executeTakeFirstOrThrow();
  return row.n;
}
