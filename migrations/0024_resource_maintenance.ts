import { type Kysely, sql } from 'kysely';

/**
 * Resources gain the `maintenance` state (src/domain/lifecycle.ts): an
 * operator's `drain` takes a resource out of service, so no new lease lands
 * on it while the leases it has carry on, and `undrain` puts it back. The
 * state's check constraint is the only part of the schema that lists
 * states; it grows by one (expand only: a worker of the release before
 * never writes the new state).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    alter table resources drop constraint resources_state_check;
    alter table resources add constraint resources_state_check
      check (state in ('pending', 'active', 'maintenance', 'released', 'broken', 'destroyed'));
  `.execute(db);
}

/** Fails while a resource is in maintenance: undrain (or release) those first. */
export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    alter table resources drop constraint resources_state_check;
    alter table resources add constraint resources_state_check
      check (state in ('pending', 'active', 'released', 'broken', 'destroyed'));
  `.execute(db);
}
