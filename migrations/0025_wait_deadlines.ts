import { type Kysely, sql } from 'kysely';

/**
 * A lease's wait deadline (`wait_deadline`): the time by which it must be
 * active. The collector releases a lease still waiting then (pending, or
 * acquired and not yet active) as `system:deadline`, like an expiry
 * (src/gc/expireLeases.ts); the release checks again when it is applied, so
 * a lease granted meanwhile keeps its slot. The partial index keeps the
 * collector's look at the waiting leases past it a lookup, however many
 * leases there are.
 *
 * Expand only: a worker of the release before neither writes nor reads the
 * column, and its collector does not release by it (docs/upgrades.md).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    alter table leases add column wait_deadline timestamptz;
    create index leases_wait_due on leases (wait_deadline)
      where wait_deadline is not null and state in ('pending', 'acquired');
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table leases drop column wait_deadline`.execute(db);
}
