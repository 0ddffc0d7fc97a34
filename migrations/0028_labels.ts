import { type Kysely, sql } from 'kysely';

/**
 * Labels and selectors (docs/scheduling.md#labels-and-selectors):
 *
 * - `blueprints.labels`: labels every resource of the blueprint carries
 *   (`os=linux`), set by whoever manages the blueprint.
 * - `resources.labels`: the labels its driver reported when it allocated
 *   it (a static pool's entry's own). A resource's labels are these with
 *   the blueprint's over them.
 * - `resources.selector`: the selector of the lease a resource was made
 *   for, which a driver that chooses among things (a static pool's entries)
 *   uses to choose one that matches.
 * - `leases.selector`: what the lease needs of its resource, as canonical
 *   selector text; it is granted a slot only on a resource whose labels
 *   match it.
 *
 * Expand only. A worker of the release before ignores labels and
 * selectors: while one still runs, a lease with a selector may be granted
 * a slot it does not match, so selectors are for after the rolling upgrade
 * (docs/upgrades.md).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    alter table blueprints add column labels jsonb not null default '{}';
    alter table resources add column labels jsonb not null default '{}';
    alter table resources add column selector text;
    alter table leases add column selector text check (length(selector) <= 1000);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    alter table leases drop column selector;
    alter table resources drop column selector;
    alter table resources drop column labels;
    alter table blueprints drop column labels;
  `.execute(db);
}
