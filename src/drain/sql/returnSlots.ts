import { CompiledQuery } from 'kysely';
import { PREPARED_MARK } from '../../db/PreparingClient.ts';

/** A lease's slot to give back to its resource, whose blueprint's line the return then asks about. */
export interface SlotReturn {
  readonly resourceId: number;
  readonly leaseId: number;
  readonly blueprintId: number;
}

/**
 * Leases' slots given back to their resources, as one statement for all of
 * a step's returns: their slot rows deleted and, in the same statement, the
 * blueprint rows of their resources share-locked (in id order, as every
 * step locks rows), which the question that follows a freed slot needs
 * first (does a lease wait for it? see slotsLeft.ts and blueprintHasWaiters
 * in handlers/slotsGivenBack.ts). The drain sends it in the round trip that
 * opens the step's transaction (DrainLane, `LockedBatch`), so returning
 * thirty leases' slots costs no round trip of its own where it cost thirty.
 *
 * The lookup of the line itself stays a statement of its own, after this
 * one: under READ COMMITTED a statement reads with the snapshot it took
 * when it started, so a lookup in the statement that waited for the lock
 * would still miss the waiter the blueprint committed meanwhile.
 *
 * Its rows: one per return asked for, with the slot it freed (null: the
 * lease held none there), so that what it answers says what it covered.
 * Each also counts the blueprints locked, which nothing reads: a CTE that
 * only selects runs only if the query reads it, and the count is what
 * makes the lock happen.
 * Marked PREPARED_MARK for a decision that sends it alone (one the step's
 * batch did not cover); it is planned once a step, not once a return (its
 * parameters are arrays, for which PostgreSQL plans each execution afresh
 * outside the commit's GENERIC_PLANS).
 */
export function returnSlotsStatement(returns: readonly SlotReturn[]): CompiledQuery {
  return CompiledQuery.raw(
    `${PREPARED_MARK} with freed as (
       delete from resource_slots s using unnest($1::bigint[], $2::bigint[]) as u(resource_id, lease_id)
       where s.lease_id = u.lease_id and s.resource_id = u.resource_id
       returning s.resource_id, s.lease_id, s.slot
     ),
     locked as (select id from blueprints where id = any($3::bigint[]) order by id for share)
     select u.resource_id, u.lease_id, u.blueprint_id, f.slot, (select count(*) from locked) as locked
     from unnest($1::bigint[], $2::bigint[], $3::bigint[]) as u(resource_id, lease_id, blueprint_id)
     left join freed f on f.resource_id = u.resource_id and f.lease_id = u.lease_id`,
    [returns.map((r) => r.resourceId), returns.map((r) => r.leaseId), returns.map((r) => r.blueprintId)],
  );
}

/** What the statement answered (its rows): each return it made, and the slot it freed, if any. */
export function slotsReturned(rows: readonly unknown[]): (SlotReturn & { readonly slot: number | undefined })[] {
  return (rows as { resource_id: number; lease_id: number; blueprint_id: number; slot: number | null }[]).map((row) => ({
    resourceId: row.resource_id,
    leaseId: row.lease_id,
    blueprintId: row.blueprint_id,
    slot: row.slot ?? undefined,
  }));
}
