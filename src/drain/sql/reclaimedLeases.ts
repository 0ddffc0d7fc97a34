import { sql } from 'kysely';
import type { Db } from '../../db/Database.ts';
import { statesWith } from '../../domain/lifecycle.ts';

/**
 * What a blueprint's decision reads to reclaim slots for its open
 * reservations (decision 0045): the leases it has told already (their
 * ending is of kind `reclaimed`, and they still hold their slot), and the
 * leases it may tell next.
 */

/** A lease that holds a slot at the blueprint. */
export interface HoldingLease {
  readonly id: number;
  readonly priority: number;
  readonly grantedAt: Date | null;
}

/** The blueprint's leases told they are reclaimed that still hold their slot, the last told first. */
export async function reclaimUnderWay(trx: Db, blueprintId: number): Promise<HoldingLease[]> {
  const holding = statesWith('lease', 'holdsSlot');
  const { rows } = await sql<HoldingLease>`
    select l.id, l.priority, l.granted_at as "grantedAt" from leases l
    where l.blueprint_id = ${blueprintId} and l.state = any(${holding}::text[]) and l.ending->>'kind' = 'reclaimed'
    order by l.updated_at desc, l.id desc
  `.execute(trx);
  return rows;
}

/** The slots of the blueprint's resources that grant slots that are being cleaned: free once cleaned, so room to come. */
export async function slotsBeingCleaned(trx: Db, blueprintId: number): Promise<number> {
  const granting = statesWith('resource', 'grantsSlots');
  const { rows } = await sql<{ n: number }>`
    select count(*)::int as n from resource_slots s join resources r on r.id = s.resource_id
    where r.blueprint_id = ${blueprintId} and r.state = any(${granting}::text[]) and s.lease_id is null
  `.execute(trx);
  return rows[0]!.n;
}

/**
 * Up to `limit` of the blueprint's leases that may be reclaimed: holding a
 * slot on a resource that grants slots (one in maintenance or quarantine
 * would not give it to the reservation), told of no end, preemptible, and
 * not of a reservation in `open` (whose slots they hold); the lowest priority first, then the shortest
 * run (the latest granted), which loses the least work.
 */
export async function reclaimable(trx: Db, blueprintId: number, open: readonly number[], limit: number): Promise<HoldingLease[]> {
  const holding = statesWith('lease', 'holdsSlot');
  const granting = statesWith('resource', 'grantsSlots');
  const { rows } = await sql<HoldingLease>`
    select l.id, l.priority, l.granted_at as "grantedAt" from leases l
    join resources r on r.id = l.resource_id and r.state = any(${granting}::text[])
    where l.blueprint_id = ${blueprintId} and l.state = any(${holding}::text[]) and l.ending is null and l.preemptible
      and (l.reservation_id is null or l.reservation_id <> all(${[...open]}::bigint[]))
    order by l.priority, l.granted_at desc nulls last, l.id desc
    limit ${limit}
  `.execute(trx);
  return rows;
}
