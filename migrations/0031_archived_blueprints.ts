import { type Kysely, sql } from 'kysely';

/**
 * A blueprint may be `archived`: done with once nothing of it is live, kept
 * for its history, out of the lists (docs/operations.md, "Archiving a
 * blueprint").
 *
 * Expand only. A worker of the release before does not know the state:
 * archive blueprints once the rolling upgrade is over (docs/upgrades.md).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    alter table blueprints drop constraint blueprints_state_check;
    alter table blueprints add constraint blueprints_state_check check (state in ('enabled', 'disabled', 'archived'));
  `.execute(db);
}
