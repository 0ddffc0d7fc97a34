import { sql } from 'kysely';
import type { Db } from '../../db/Database.ts';
import { liveStates } from '../../domain/lifecycle.ts';
import { perStep } from '../../db/perStep.ts';

/**
 * What a blueprint's decision reads of its reservations (decision 0045):
 * those whose window is open now, with how many of their slots their
 * leases use, and the leases that wait for one. Read only by a blueprint
 * whose `reserved_until` is still ahead, so a blueprint that never had a
 * reservation reads nothing here.
 */

/**
 * A reservation whose window has not ended (and that has not handed back
 * what its leases do not use): whether it is open now, and how many of its
 * slots its leases hold or are on their way to.
 */
export interface ReservationNow {
  readonly id: number;
  readonly slots: number;
  readonly startsAt: Date;
  readonly endsAt: Date;
  /** Its window is open now (else it is to come, and its leases use none). */
  readonly open: boolean;
  readonly used: number;
}

/**
 * The blueprint's reservations whose window is open or to come, oldest
 * first, less those that have handed the slots their leases do not use
 * back to the line (their leases are served as any other then). A lease
 * uses a slot
 * of its reservation as a quota counts it (countedLeases.ts): from the
 * decision that serves it (its `acquire` queued, or promised in this step)
 * until it gives its slot back.
 */
export async function reservationsNow(trx: Db, blueprintId: number): Promise<ReservationNow[]> {
  const live = liveStates('lease');
  const { rows } = await sql<ReservationNow>`
    select v.id, v.slots, v.starts_at as "startsAt", v.ends_at as "endsAt", v.starts_at <= now() as open,
           case when v.starts_at > now() then 0 else (select count(*)::int from leases l
             where l.reservation_id = v.id and l.state = any(${live}::text[])
               and (exists (select 1 from resource_slots s where s.lease_id = l.id)
                    or exists (select 1 from commands c
                               where c.target_kind = 'resource' and c.kind = 'acquire' and c.status in ('queued', 'running')
                                 and (c.payload->>'leaseId')::bigint = l.id))) end as used
    from reservations v
    where v.blueprint_id = ${blueprintId} and v.cancelled_at is null and v.ends_at > now()
      and (v.hand_back_after_ms is null or now() < v.starts_at + v.hand_back_after_ms * interval '1 ms')
    order by v.id
  `.execute(trx);
  const promised = promisedInStep(trx);
  return rows.map((r) => ({ ...r, used: r.used + (promised.get(r.id) ?? 0) }));
}

/** Counts a lease of reservation `id` this step's decision has just sent to a resource, until the step commits its acquire. */
export function countReservedPromise(trx: Db, id: number): void {
  const promised = promisedInStep(trx);
  promised.set(id, (promised.get(id) ?? 0) + 1);
}

const promisedInStep = perStep(() => new Map<number, number>());

/** A lease that waits in the blueprint's line for a slot of its reservation. */
export interface ReservationWaiter {
  readonly reservation_id: number;
  readonly lease_id: number;
  readonly since: Date;
  readonly team: string;
  readonly holder: string;
  readonly priority: number;
  readonly requested_at: Date;
  readonly selector: string | null;
}

/**
 * The first leases of each reservation waiting in the blueprint's line (as
 * many as `wanted` gives for it), in the order of their places: one
 * statement for all of them.
 */
export async function reservationWaiters(
  trx: Db,
  blueprintId: number,
  wanted: ReadonlyArray<{ readonly id: number; readonly limit: number }>,
): Promise<ReservationWaiter[]> {
  if (wanted.length === 0) return [];
  const { rows } = await sql<ReservationWaiter>`
    select r.id as reservation_id, x.*
    from unnest(${wanted.map((w) => w.id)}::bigint[], ${wanted.map((w) => w.limit)}::int[]) as r(id, n)
    cross join lateral (
      select w.lease_id, w.since, w.team, l.holder, l.priority, l.created_at as requested_at, l.selector
      from leases l join blueprint_waiters w on w.lease_id = l.id
      where l.reservation_id = r.id and l.state = 'pending' and w.blueprint_id = ${blueprintId}
      order by w.since, w.lease_id
      limit r.n
    ) x
  `.execute(trx);
  return rows;
}
