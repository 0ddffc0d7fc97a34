import { sql } from 'kysely';
import type { ResourceRow } from '../../../migrations/schema.ts';
import type { Db } from '../../db/Database.ts';
import { PREPARED_MARK } from '../../db/PreparingClient.ts';

/**
 * A lease's slot given back to its resource: the slot row deleted and, in
 * the same statement, the resource's blueprint row share-locked, which the
 * question that follows a freed slot needs first (does a lease wait for it?
 * see blueprintHasWaiters in resourceHandlers.ts): one round trip for what
 * took two. Answers the slot, or undefined when the lease held none here.
 *
 * The lookup of the line itself stays a statement of its own, after this
 * one: under READ COMMITTED a statement reads with the snapshot it took when
 * it started, so a lookup in the statement that waited for the lock would
 * still miss the waiter the blueprint committed meanwhile.
 *
 * Prepared (PREPARED_MARK): it runs once per release of an active lease, and
 * sent unnamed it was parsed, analysed and planned (a CTE and two sublinks)
 * every time, which in a `perf` profile of releases was most of the
 * PostgreSQL CPU that went to planning. Its values are all keys, so
 * PostgreSQL soon keeps one generic plan for it.
 */
export async function returnSlot(trx: Db, resource: ResourceRow, leaseId: number): Promise<number | undefined> {
  // A CTE that only selects runs only if the query reads it: the lock's row count is read for that.
  const { rows } = await sql<{ slot: number | null; locked: string }>`${sql.raw(PREPARED_MARK)}
    with freed as (delete from resource_slots where resource_id = ${resource.id} and lease_id = ${leaseId} returning slot),
    locked as (select id from blueprints where id = ${resource.blueprint_id} for share)
    select (select slot from freed) as slot, (select count(*) from locked) as locked
  `.execute(trx);
  return rows[0]!.slot ?? undefined;
}
