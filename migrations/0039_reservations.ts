import { type Kysely, sql } from 'kysely';

/**
 * Advance reservations (docs/scheduling.md, "Reservations"; decision 0045).
 *
 * - `reservations`: `slots` of one blueprint held from `starts_at` to
 *   `ends_at` for the leases that name the reservation, optionally only
 *   those of one team (`team`) or of some holders (`holders`); who made it,
 *   from where and why, and who cancelled it; `hand_back_after_ms`: how
 *   long after the window opens the slots its leases do not use go back to
 *   the line (null: held to the end). Written only under the
 *   blueprint's lock (its single writer, as a change of its limits is:
 *   decision 0007); read by the blueprint's decisions during the window.
 * - `blueprints.reserved_until`: the latest end of a reservation made
 *   there (null: none), so that a decision of a blueprint with none reads
 *   nothing more.
 * - `leases_reclaimed`: the leases a blueprint told it reclaims for a
 *   reservation (their ending's kind), which its decisions read while it
 *   has a reservation.
 * - `leases.reservation_id`: the reservation a lease was created to use,
 *   and `reservation_ends_at` the end of its window then: the lease ends
 *   by it (its `end_by`, as a time limit's), told ahead as for one.
 *
 * Expand only: a worker of the release before neither reads nor writes
 * them, and serves the line as if there were no reservation.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table reservations (
      id bigint generated always as identity primary key,
      blueprint_id bigint not null references blueprints (id) on delete cascade,
      slots int not null check (slots > 0),
      starts_at timestamptz not null,
      ends_at timestamptz not null,
      team text references teams (name),
      holders text[],
      hand_back_after_ms bigint check (hand_back_after_ms > 0),
      created_by text not null,
      created_source text not null,
      reason text,
      created_at timestamptz not null default now(),
      cancelled_at timestamptz,
      cancelled_by text,
      cancelled_source text,
      cancel_reason text,
      check (starts_at < ends_at)
    );
    create index reservations_by_blueprint on reservations (blueprint_id, ends_at) where cancelled_at is null;
    alter table blueprints add column reserved_until timestamptz;
    alter table leases add column reservation_id bigint references reservations (id) on delete set null,
      add column reservation_ends_at timestamptz;
    create index leases_by_reservation on leases (reservation_id) where reservation_id is not null;
    create index leases_reclaimed on leases (blueprint_id) where ending->>'kind' = 'reclaimed';
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    alter table leases drop column reservation_ends_at, drop column reservation_id;
    alter table blueprints drop column reserved_until;
    drop table reservations;
  `.execute(db);
}
