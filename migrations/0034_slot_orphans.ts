import { type Kysely, sql } from 'kysely';

/**
 * Orphaned slots: a slot a driver holds on a live resource that no lease
 * holds (docs/operations.md, "Orphans"; decision 0037).
 *
 * - an orphan's `slot`: set, the orphan is that slot of its `resource_id`
 *   (which it then names); unset, it is a thing no resource stands for.
 *
 * Expand only: a worker of the release before neither lists slots nor
 * frees them, and reads the rows it knows as before.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    alter table orphans add column slot int check (slot >= 0),
      add constraint orphans_slot_on_a_resource check (slot is null or resource_id is not null);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table orphans drop column slot;`.execute(db);
}
