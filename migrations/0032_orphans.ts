import { type Kysely, sql } from 'kysely';

/**
 * Orphans: what a blueprint's driver holds that no resource stands for
 * (docs/operations.md, "Orphans"; decision 0037).
 *
 * - `orphans`: per blueprint, each thing its driver listed that matched no
 *   resource, as the collector's last pass left it (each pass rewrites a
 *   blueprint's rows): the driver's id for it, the resource id and
 *   attributes it reported, when it was first and last seen unmatched, and
 *   in how many passes in a row.
 * - a blueprint's `orphans`: what the collector does with one: `report` it
 *   (the default), or `destroy` it through the driver.
 *
 * Expand only: a worker of the release before neither lists nor destroys.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    alter table blueprints add column orphans text not null default 'report' check (orphans in ('report', 'destroy'));
    create table orphans (
      blueprint_id bigint not null references blueprints (id),
      external_id text not null,
      resource_id bigint,
      attributes jsonb not null default '{}',
      first_seen_at timestamptz not null default now(),
      last_seen_at timestamptz not null default now(),
      passes int not null default 1 check (passes > 0),
      primary key (blueprint_id, external_id)
    );
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    drop table orphans;
    alter table blueprints drop column orphans;
  `.execute(db);
}
