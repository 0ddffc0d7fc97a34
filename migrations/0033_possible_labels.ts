import { type Kysely, sql } from 'kysely';

/**
 * - A blueprint's `possible_labels`: every set of labels its driver may
 *   report for a resource under its settings (DriverFactory.possibleLabels),
 *   written with the settings; null where the driver's program decides them
 *   (exec). Read where a selector is judged (choosing a blueprint, serving
 *   the line, a lease's place in line) without asking the drivers, so a
 *   read model need not load them (decision 0038).
 * - `resources_by_selector`: the resources made for a selector, which a
 *   blueprint whose program decides labels consults before making another
 *   for it (decision 0038).
 *
 * The rows there are get what each driver answers today. Expand only: a
 * worker of the release before leaves the column as it is when it applies
 * new settings, until a worker of this release applies the next.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    alter table blueprints add column possible_labels jsonb;
    update blueprints set possible_labels = case driver
      when 'static-pool' then coalesce(
        (select jsonb_agg(coalesce(e -> 'labels', '{}'::jsonb) order by n) from jsonb_array_elements(settings -> 'entries') with ordinality as x(e, n)),
        '[]'::jsonb)
      when 'simulated' then jsonb_build_array(coalesce(settings -> 'labels', '{}'::jsonb))
      when 'directory' then '[{}]'::jsonb
    end;
    create index resources_by_selector on resources (blueprint_id, selector) where selector is not null;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    drop index resources_by_selector;
    alter table blueprints drop column possible_labels;
  `.execute(db);
}
