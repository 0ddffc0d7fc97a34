import { type Kysely, sql } from 'kysely';

/**
 * Resources that stay healthy (src/domain/lifecycle.ts, docs/operations.md):
 *
 * - two new resource states: `maintenance` (an operator's `drain` took it
 *   out of service) and `quarantined` (a check found it unhealthy); neither
 *   takes new leases, the leases on it carry on. The state's check
 *   constraint is the only part of the schema that lists states.
 * - the observe loop's record on the resource row: the last answer of its
 *   driver's check (`health`, with `health_message`) and when it was given
 *   (`checked_at`). A check that answers as the one before changes only
 *   `checked_at`, so a healthy resource checked every minute is one row.
 * - a blueprint's `check_interval_ms`: how often the collector asks each of
 *   its resources to be checked (null: never).
 * - a lease's `callback_url`: the holder's callback, told when Slipway ends
 *   the lease itself because a check found its resource gone.
 * - cleaning between leases: a blueprint that asks for it
 *   (`clean_between_leases`) has each slot a lease gives back cleaned by its
 *   driver before another lease may have it, and quarantines a resource
 *   whose cleaning failed `clean_attempts` times in a row. A slot waiting to
 *   be cleaned is a row of `resource_slots` with no lease: taken, so nobody
 *   is granted it, and counted in the resource's used slots.
 *
 * Expand only: a worker of the release before never writes the new states or
 * columns (but see docs/upgrades.md on draining during a roll).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    alter table resources drop constraint resources_state_check;
    alter table resources add constraint resources_state_check
      check (state in ('pending', 'active', 'maintenance', 'quarantined', 'released', 'broken', 'destroyed'));
    alter table resources
      add column health text check (health in ('healthy', 'unhealthy', 'gone')),
      add column health_message text,
      add column checked_at timestamptz;
    alter table blueprints
      add column check_interval_ms bigint check (check_interval_ms > 0),
      add column clean_between_leases boolean not null default false,
      add column clean_attempts int not null default 3 check (clean_attempts between 1 and 100);
    alter table resource_slots alter column lease_id drop not null;
    alter table leases add column callback_url text;
  `.execute(db);
}

/** Fails while a resource is in maintenance or quarantined: uncordon, repair or release those first. */
export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    alter table leases drop column callback_url;
    delete from resource_slots where lease_id is null;
    alter table resource_slots alter column lease_id set not null;
    alter table blueprints drop column check_interval_ms, drop column clean_between_leases, drop column clean_attempts;
    alter table resources drop column health, drop column health_message, drop column checked_at;
    alter table resources drop constraint resources_state_check;
    alter table resources add constraint resources_state_check
      check (state in ('pending', 'active', 'released', 'broken', 'destroyed'));
  `.execute(db);
}
