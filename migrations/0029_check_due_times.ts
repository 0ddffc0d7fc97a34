import { type Kysely, sql } from 'kysely';

/**
 * A resource's next health check is due `check_interval_ms` after its last
 * one (`checked_at`; never checked: due at once). Every worker's timekeeper
 * (src/worker/Timekeeper.ts) asks each second which checks are due and when
 * the next one falls due; this index answers both per blueprint with one
 * range read, the never-checked first (as minus infinity), however many
 * resources the blueprint has. Its states are those that take a `check`
 * (src/domain/lifecycle.ts).
 *
 * Expand only: an index, which a worker of the release before does not
 * need and does not mind.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create index resources_check_due on resources (blueprint_id, (coalesce(checked_at, '-infinity'::timestamptz)))
      where state in ('active', 'maintenance', 'quarantined');
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index resources_check_due`.execute(db);
}
