import { type Kysely, sql } from 'kysely';

/**
 * Two of the commands table's list indexes (0008) covered every row, and a
 * status change is never a HOT update (status is in the queue indexes'
 * predicates), so each command's insert, `running` mark and settlement
 * added an entry to both. They serve list filters (`?status=`, `?source=`)
 * that need them only for rare values:
 *
 * - by status: queued and running are few and already indexed
 *   (commands_unsettled); done is most rows, found by reading ids in order.
 *   Only the other, rare, terminal statuses (failed, cancelled, coalesced)
 *   need an index, and a command reaches one of them once, at its end.
 * - by source: `system` (the drain's follow-ups) is most rows, found by
 *   reading ids in order; the sources of people and programs are indexed.
 *
 * The planner uses a partial index when the filter's value implies its
 * predicate, which a literal or a custom plan's parameter does.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    -- "if not exists": an operator with a large table may have built them
    -- first, concurrently (docs/upgrades.md).
    create index if not exists commands_by_rare_status_id on commands (status, id) where status not in ('queued', 'running', 'done');
    create index if not exists commands_by_outside_source_id on commands (source, id) where source <> 'system';
    drop index commands_by_status_id, commands_by_source_id;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    create index commands_by_status_id on commands (status, id);
    create index commands_by_source_id on commands (source, id);
    drop index commands_by_rare_status_id, commands_by_outside_source_id;
  `.execute(db);
}
