import { sql } from 'kysely';
import type { Db } from '../db/Database.ts';
import { recordEvent } from '../db/recordEvent.ts';
import { withTransaction } from '../db/withTransaction.ts';
import type { Actor } from '../domain/Actor.ts';
import { CommandRejectedError, describeZodIssues, InvalidInputError, NotFoundError } from '../domain/errors.ts';
import { liveStates } from '../domain/lifecycle.ts';
import {
  peakReserved,
  RESERVATION_MOMENTS,
  type ReservationInput,
  ReservationInputSchema,
  type ReservationTerms,
  whyNotUsable,
  describeWhoMay,
} from '../domain/reservations.ts';
import { formatTime } from '../domain/times.ts';
import { appendInTransaction } from '../queue/appendCommand.ts';
import { lockObjectInTransaction } from '../queue/lockObjectInTransaction.ts';
import { findBlueprint } from '../read/blueprints.ts';
import { RESERVATION_MISSING_HINT, readReservation, type ReservationView } from '../read/reservations.ts';
import { assertTeamExists } from './teams.ts';

/**
 * Making and cancelling reservations (decision 0045). A reservation is its
 * blueprint's: it is written only under the blueprint's lock, as a change
 * of its limits is (decision 0007), so the check that the blueprint can
 * honour it, against the reservations it overlaps, is exact, and no drain
 * of the blueprint is mid-decision while it changes. Each change records
 * who made it, from where and why, on the reservation and as an event on
 * the blueprint's timeline.
 */

/** The actor's reason, for an event's message (events keep no reason of their own). */
const because = (actor: Actor) => (actor.reason ? `: ${actor.reason}` : '');

/** Makes a reservation, or refuses it, saying why, with nothing written. */
export async function createReservation(db: Db, input: ReservationInput, actor: Actor): Promise<ReservationView> {
  const parsed = ReservationInputSchema.safeParse(input);
  if (!parsed.success) throw new InvalidInputError(`invalid reservation: ${describeZodIssues(parsed.error.issues)}`);
  const { blueprint: ref, slots, team, holders, handBackAfterMs } = parsed.data;
  const from = new Date(parsed.data.from);
  const to = new Date(parsed.data.to);
  if (team !== undefined) await assertTeamExists(db, team);
  const id = await withTransaction(db, async (trx) => {
    const { id: blueprintId } = await findBlueprint(trx, ref);
    await lockObjectInTransaction(trx, { kind: 'blueprint', id: blueprintId });
    const blueprint = await findBlueprint(trx, blueprintId);
    if (!liveStates('blueprint').includes(blueprint.state)) {
      throw new CommandRejectedError(`blueprint ${blueprint.name} is ${blueprint.state}: it takes no reservations`, { state: blueprint.state });
    }
    const overlapping = await trx
      .selectFrom('reservations')
      .select(['id', 'slots', 'starts_at', 'ends_at'])
      .where('blueprint_id', '=', blueprint.id)
      .where('cancelled_at', 'is', null)
      .where('ends_at', '>', from)
      .where('starts_at', '<', to)
      .execute();
    const capacity = blueprint.max_resources * blueprint.leases_per_resource;
    const peak = peakReserved(
      overlapping.map((o) => ({ id: o.id, slots: o.slots, startsAt: o.starts_at, endsAt: o.ends_at })),
      from,
      to,
    );
    if (peak.slots + slots > capacity) {
      const left = Math.max(0, capacity - peak.slots);
      const others = peak.by.length === 0 ? '' : `; reservation(s) ${peak.by.join(', ')} hold ${peak.slots} of them at once in that window`;
      throw new CommandRejectedError(
        `blueprint ${blueprint.name} cannot hold ${slots} slot(s) from ${formatTime(from)} to ${formatTime(to)}: it has ${capacity} (max resources ${blueprint.max_resources} × ${blueprint.leases_per_resource} lease(s) each)${others}, so ${left} can be reserved: ask for at most ${left}, choose another window, or raise its limit`,
        { blueprint: blueprint.name, capacity, reserved: peak.slots, reservations: peak.by, available: left },
      );
    }
    const row = await trx
      .insertInto('reservations')
      .values({
        blueprint_id: blueprint.id,
        slots,
        starts_at: from,
        ends_at: to,
        team: team ?? null,
        holders: holders ?? null,
        hand_back_after_ms: handBackAfterMs ?? null,
        created_by: actor.issuedBy,
        created_source: actor.source,
        reason: actor.reason ?? null,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    // The blueprint's decisions read its reservations only until the last of them ends.
    await trx
      .updateTable('blueprints')
      .set({
        reserved_until: sql<Date>`greatest(reserved_until, ${to.toISOString()}::timestamptz)`,
        version: sql<number>`version + 1`,
        updated_at: sql<Date>`now()`,
      })
      .where('id', '=', blueprint.id)
      .execute();
    await recordEvent(trx, {
      target: { kind: 'blueprint', id: blueprint.id },
      type: 'reservation_created',
      message: `reservation ${row.id}: ${slots} slot(s) from ${formatTime(from)} to ${formatTime(to)} for ${describeWhoMay(team, holders)}${because(actor)}`,
      actor,
      commandId: null,
      data: { reservationId: row.id, slots, from: from.toISOString(), to: to.toISOString(), team: team ?? null, holders: holders ?? null },
    });
    // At the window's start (slots reclaimed for it if need be), when it hands its unused slots back, and at its end (the slots it held back go
    // to the line), the blueprint's drain decides again.
    const handBackAt = handBackAfterMs === undefined ? undefined : new Date(from.getTime() + handBackAfterMs);
    const moments = [
      ...(from.getTime() > Date.now() ? [{ moment: 'start' as const, at: from }] : []),
      ...(handBackAt !== undefined && handBackAt < to ? [{ moment: 'hand_back' as const, at: handBackAt }] : []),
      { moment: 'end' as const, at: to },
    ];
    for (const { moment, at } of moments) {
      await appendInTransaction(
        trx,
        {
          target: { kind: 'blueprint', id: blueprint.id },
          kind: 'reservation_due',
          payload: { reservationId: row.id, moment },
          actor: { ...actor, reason: `reservation ${row.id}: ${RESERVATION_MOMENTS[moment]} at ${formatTime(at)}` },
          notBefore: at,
        },
        { fromOutside: false },
      );
    }
    return row.id;
  });
  return readReservation(db, id);
}

/** Cancels a reservation whose window has not ended: the slots it held back go to the line at once. */
export async function cancelReservation(db: Db, id: number, actor: Actor): Promise<ReservationView> {
  await withTransaction(db, async (trx) => {
    const { blueprint_id: blueprintId } = await readReservation(trx, id);
    await lockObjectInTransaction(trx, { kind: 'blueprint', id: blueprintId });
    const reservation = await readReservation(trx, id);
    if (reservation.state === 'cancelled' || reservation.state === 'ended') {
      const when =
        reservation.state === 'cancelled'
          ? `was cancelled at ${formatTime(reservation.cancelled_at!)} by ${reservation.cancelled_by}`
          : `ended at ${formatTime(reservation.ends_at)}`;
      throw new CommandRejectedError(`reservation ${id} ${when}: there is nothing to cancel`, { state: reservation.state });
    }
    await trx
      .updateTable('reservations')
      .set({ cancelled_at: sql<Date>`now()`, cancelled_by: actor.issuedBy, cancelled_source: actor.source, cancel_reason: actor.reason ?? null })
      .where('id', '=', id)
      .execute();
    await recordEvent(trx, {
      target: { kind: 'blueprint', id: blueprintId },
      type: 'reservation_cancelled',
      message: `reservation ${id} cancelled (${reservation.slots} slot(s) from ${formatTime(reservation.starts_at)} to ${formatTime(reservation.ends_at)})${because(actor)}`,
      actor,
      commandId: null,
      data: { reservationId: id },
    });
    // The moments of its window queued on the blueprint have nothing left to do.
    await trx
      .updateTable('commands')
      .set({ status: 'cancelled', message: `cancelled with reservation ${id} by ${actor.issuedBy}`, finished_at: sql<Date>`now()` })
      .where('target_kind', '=', 'blueprint')
      .where('target_id', '=', blueprintId)
      .where('kind', '=', 'reservation_due')
      .where('status', '=', 'queued')
      .where(sql<boolean>`(payload->>'reservationId')::bigint = ${id}`)
      .execute();
    // Slots it held back now go to the line.
    if (reservation.state === 'active') {
      await appendInTransaction(
        trx,
        {
          target: { kind: 'blueprint', id: blueprintId },
          kind: 'serve_waiters',
          actor: { ...actor, reason: `reservation ${id} cancelled: the slots it held back go to the line` },
        },
        { fromOutside: false },
      );
    }
  });
  return readReservation(db, id);
}

/** The blueprint of reservation `id` (404 if there is none). */
export async function reservationBlueprintId(db: Db, id: number): Promise<number> {
  const row = await db.selectFrom('reservations').select('blueprint_id').where('id', '=', id).executeTakeFirst();
  if (!row) throw new NotFoundError('reservation', id, RESERVATION_MISSING_HINT);
  return row.blueprint_id;
}

/**
 * The reservation a new lease names, if it may use it now (its blueprint,
 * window, team and holders): refused with why otherwise (409), or as
 * missing (404). A look at the request: the blueprint's decision serves
 * from the reservation only while its window is open and it stands, and
 * serves a lease whose reservation closed meanwhile as any other.
 */
export async function usableReservation(
  db: Db,
  id: number,
  lease: { readonly team: string; readonly holder: string; readonly blueprintId: number | undefined },
): Promise<ReservationTerms> {
  const row = await db
    .selectFrom('reservations as v')
    .innerJoin('blueprints as b', 'b.id', 'v.blueprint_id')
    .select(['v.id', 'v.blueprint_id', 'b.name', 'v.starts_at', 'v.ends_at', 'v.team', 'v.holders', 'v.cancelled_at', sql<Date>`now()`.as('now')])
    .where('v.id', '=', id)
    .executeTakeFirst();
  if (!row) throw new NotFoundError('reservation', id, RESERVATION_MISSING_HINT);
  const terms: ReservationTerms = {
    id: row.id,
    blueprintId: row.blueprint_id,
    blueprintName: row.name,
    startsAt: row.starts_at,
    endsAt: row.ends_at,
    team: row.team,
    holders: row.holders,
    cancelledAt: row.cancelled_at,
  };
  const why = whyNotUsable(terms, lease, row.now);
  if (why) throw new CommandRejectedError(`the lease may not use reservation ${id}: ${why}`, { reservation: id });
  return terms;
}
