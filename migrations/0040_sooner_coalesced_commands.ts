import type { Kysely } from 'kysely';

/**
 * `slipway_append_command` brings a queued command forward when a request
 * for the same command (its dedup key) asks for it sooner and is coalesced
 * into it (src/db/functions/slipway_append_command.ts). Before, a
 * blueprint's `serve_waiters` queued for later (the look at the line that
 * preemption queues for when a lease has run its minimum) absorbed every
 * `serve_waiters` asked for meanwhile, such as a raised limit's, and the
 * line waited for it.
 *
 * The function is replaced after the migrations, as every function whose
 * file changed is (docs/upgrades.md, "SQL functions"); this migration
 * holds nothing else, so workers of this release wait for it. Workers of
 * the release before call the new text unchanged: its arguments and its
 * answer are the same.
 */
export async function up(_db: Kysely<unknown>): Promise<void> {}

export async function down(_db: Kysely<unknown>): Promise<void> {}
