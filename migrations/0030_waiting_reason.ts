import { type Kysely, sql } from 'kysely';

/**
 * `blueprint_waiters.why`: why the lease waits, in the blueprint's words
 * when it joined the line ("team qa holds 3 of its quota of 3", "at its
 * limit; 2 of 2 live, no free slot"), which its place in line shows
 * (`GET /v1/leases/{id}`, `lease run`, the web UI).
 *
 * Expand only: a worker of the release before leaves it null, and a lease
 * it queues shows its place without a reason.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table blueprint_waiters add column why text`.execute(db);
}
