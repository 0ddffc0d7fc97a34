import { type Kysely, sql } from 'kysely';

/**
 * commands_unsettled, the index of every unsettled command by due time,
 * serves only queries that compare `not_before`.
 *
 * Its predicate was "queued or running", which every read of a few
 * objects' unsettled commands implies too: the acquires on their way to a
 * blueprint's resources (the free-slot read of waitingLine.ts, the quota
 * counts of countedLeases.ts, the lease read of requestingLease.ts). The
 * planner may then scan the whole index and filter, rather than probe the
 * small index made for the question (commands_acquires_in_flight). It does
 * when the statistics were taken while few commands were unsettled, as
 * they nearly always are on a service that keeps up: both indexes are then
 * costed at a row or so, and the scan wins. Under a backlog each such read
 * then reads every unsettled command, once per resource: with a few
 * thousand queued, a blueprint's decision spent tens of milliseconds per
 * read, and a backlog fed itself. 0023 kept the drain's own queue reads
 * off this index by spelling their time condition so that it cannot serve
 * them; this puts the rule on the index instead, for every query at once.
 *
 * The new predicate adds `not_before is not null`. The column is NOT NULL,
 * so the index holds the same rows, but PostgreSQL uses a partial index
 * only for a query whose conditions prove its predicate, and only a
 * comparison of `not_before` (the sweeper's "due before so long ago")
 * proves that. A query that merely lists `is not null` does not count on
 * it: PostgreSQL 17 drops such a condition on a NOT NULL column.
 *
 * Built before the old one is dropped, under another name then renamed,
 * so the sweeper is never without it. Workers and API servers of the
 * release before run unchanged on it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    -- "if not exists": an operator with a large table may have built it
    -- first, concurrently (docs/upgrades.md).
    create index if not exists commands_unsettled_by_due on commands (not_before)
      where status in ('queued', 'running') and not_before is not null;
    drop index commands_unsettled;
    alter index commands_unsettled_by_due rename to commands_unsettled;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    create index commands_unsettled_by_due on commands (not_before) where status in ('queued', 'running');
    drop index commands_unsettled;
    alter index commands_unsettled_by_due rename to commands_unsettled;
  `.execute(db);
}
