import { sql } from 'kysely';
import type { ResourceRow } from '../../../migrations/schema.ts';
import type { Db } from '../../db/Database.ts';
import { PREPARED_MARK } from '../../db/PreparingClient.ts';

/** What a resource found when a lease asked it for a slot, and the slot it took for the lease, if it took one. */
export interface SlotTaken {
  /** The lease's state and resource as the statement read them (undefined: no such lease). */
  readonly lease: { readonly state: string; readonly resourceId: number | null; readonly selector: string | null } | undefined;
  /** The resource on which the lease already holds a slot, if it does. */
  readonly heldOn: number | undefined;
  /** The lowest free slot, now the lease's; undefined when any check above, or a full resource, refused it. */
  readonly slot: number | undefined;
  /** The resource's slots taken before this one: its slot rows (see slotsInUse in resourceHandlers.ts). */
  readonly taken: number;
}

/**
 * A resource's answer to a lease's `acquire`, in one round trip rather than
 * one per question: whether the lease still wants a slot (pending, with
 * none recorded), whether it already holds one somewhere, and, if it wants
 * one and this resource has room, the lowest free slot taken for it; and
 * how many slots were taken before (the resource's slot rows: a full
 * resource has no free slot to find, whatever `used_slots` says). The
 * resource's drain is the only writer of its slots, so the free slot read
 * here is still free at the insert; the lease's row is written only by the
 * lease's drain, which a pending lease's acquire does not wait for (a lease
 * released meanwhile finds its grant and gives the slot back).
 *
 * A lease with a selector is not given a slot until the caller has matched
 * it against the resource's labels (`selectorMatched`): it answers the
 * selector, and the caller asks again once it matches (the common lease,
 * with none, still takes one round trip).
 *
 * Prepared (PreparingClient): parsing and planning it took about twice
 * its execution, at every acquire (a statement log on PostgreSQL 15). Its
 * constants are in its text and its parameters are keys and counts, so one
 * plan serves every call.
 */
export async function takeSlot(trx: Db, resource: ResourceRow, leaseId: number, selectorMatched = false): Promise<SlotTaken> {
  const { rows } = await sql<{
    lease_state: string | null;
    lease_resource: number | null;
    lease_selector: string | null;
    held_on: number | null;
    slot: number | null;
    taken: number;
  }>`${sql.raw(PREPARED_MARK)}
    with lease as (select state, resource_id, selector from leases where id = ${leaseId}),
    held as (select resource_id from resource_slots where lease_id = ${leaseId}),
    wanted as (
      select 1 from lease where state = 'pending' and resource_id is null and not exists (select 1 from held)
        and (selector is null or ${selectorMatched})
    ),
    taken as (
      insert into resource_slots (resource_id, slot, lease_id)
      select ${resource.id}::bigint, free.slot, ${leaseId}::bigint
        from wanted,
             (select min(s)::int as slot from generate_series(0, ${resource.capacity - 1}::int) as s
               where not exists (select 1 from resource_slots where resource_id = ${resource.id}::bigint and slot = s)) as free
       where free.slot is not null
      returning slot
    )
    select (select state from lease) as lease_state, (select resource_id from lease) as lease_resource, (select selector from lease) as lease_selector,
           (select resource_id from held) as held_on, (select slot from taken) as slot,
           (select count(*) from resource_slots where resource_id = ${resource.id}::bigint)::int as taken
  `.execute(trx);
  const row = rows[0]!;
  return {
    lease:
      row.lease_state === null
        ? undefined
        : { state: row.lease_state, resourceId: row.lease_resource === null ? null : Number(row.lease_resource), selector: row.lease_selector },
    heldOn: row.held_on === null ? undefined : Number(row.held_on),
    slot: row.slot ?? undefined,
    taken: row.taken,
  };
}
