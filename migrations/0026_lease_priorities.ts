import { type Kysely, sql } from 'kysely';

/**
 * Lease priorities (docs/scheduling.md):
 *
 * - `leases.priority` (0–9, default 0): how urgent the request is, within
 *   the range its requester's role allows (src/api/auth/roles.ts).
 * - `blueprints.priority_step_ms`: how much waiting one level of priority
 *   is worth at that blueprint. A lease joins the line at its request time
 *   less `priority × priority_step_ms` (the `since` of its
 *   blueprint_waiters row, which the line is ordered by): it goes ahead of
 *   lower-priority leases that have waited less than that, and behind those
 *   that have waited longer. So no lease starves: one that has waited
 *   `9 × priority_step_ms` is ahead of every lease requested after it, and
 *   the line stays a static order, read by its index like before.
 *
 * Expand only: a worker of the release before puts every lease at its
 * request time (priority 0), which is the order of that release.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    alter table leases add column priority smallint not null default 0 check (priority between 0 and 9);
    alter table blueprints add column priority_step_ms bigint not null default 60000 check (priority_step_ms between 0 and 86400000);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    alter table blueprints drop column priority_step_ms;
    alter table leases drop column priority;
  `.execute(db);
}
