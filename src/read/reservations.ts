import { sql } from 'kysely';
import type { ReservationRow } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import { NotFoundError } from '../domain/errors.ts';
import { liveStates } from '../domain/lifecycle.ts';
import type { ReservationState } from '../domain/reservations.ts';

/** A reservation as every interface shows it: its row, its blueprint's name, where it stands, and its leases. */
export interface ReservationView extends ReservationRow {
  readonly blueprint_name: string;
  readonly state: ReservationState;
  /** Its leases that hold a slot now. */
  readonly holding: number;
  /** Its leases that wait in the blueprint's line. */
  readonly waiting: number;
}

/** What a request naming a reservation that does not exist is told to do. */
export const RESERVATION_MISSING_HINT = 'list them with `slipway reservation list` (or GET /v1/reservations)';

/** The most reservations a list answers. */
export const RESERVATION_LIST_LIMIT = 1000;

function reservations(db: Db) {
  const live = liveStates('lease');
  return db
    .selectFrom('reservations as v')
    .innerJoin('blueprints as b', 'b.id', 'v.blueprint_id')
    .selectAll('v')
    .select([
      'b.name as blueprint_name',
      sql<ReservationState>`case when v.cancelled_at is not null then 'cancelled' when now() < v.starts_at then 'upcoming'
        when now() < v.ends_at then 'active' else 'ended' end`.as('state'),
      sql<number>`(select count(*)::int from leases l where l.reservation_id = v.id and l.state = any(${live}::text[])
        and exists (select 1 from resource_slots s where s.lease_id = l.id))`.as('holding'),
      sql<number>`(select count(*)::int from leases l join blueprint_waiters w on w.lease_id = l.id
        where l.reservation_id = v.id and l.state = 'pending')`.as('waiting'),
    ]);
}

/** What each state means, as a condition on `v`. */
const IN_STATE: Readonly<Record<ReservationState, ReturnType<typeof sql<boolean>>>> = {
  upcoming: sql<boolean>`v.cancelled_at is null and now() < v.starts_at`,
  active: sql<boolean>`v.cancelled_at is null and v.starts_at <= now() and now() < v.ends_at`,
  ended: sql<boolean>`v.cancelled_at is null and v.ends_at <= now()`,
  cancelled: sql<boolean>`v.cancelled_at is not null`,
};

/** The reservations, by window (the soonest first), of one blueprint if given, in one state if given; at most RESERVATION_LIST_LIMIT. */
export async function listReservations(db: Db, filter: { blueprintId?: number; state?: ReservationState }): Promise<ReservationView[]> {
  return reservations(db)
    .$if(filter.blueprintId !== undefined, (qb) => qb.where('v.blueprint_id', '=', filter.blueprintId!))
    .$if(filter.state !== undefined, (qb) => qb.where(IN_STATE[filter.state!]))
    .orderBy('v.starts_at')
    .orderBy('v.id')
    .limit(RESERVATION_LIST_LIMIT)
    .execute();
}

export async function readReservation(db: Db, id: number): Promise<ReservationView> {
  const row = await reservations(db).where('v.id', '=', id).executeTakeFirst();
  if (!row) throw new NotFoundError('reservation', id, RESERVATION_MISSING_HINT);
  return row;
}
