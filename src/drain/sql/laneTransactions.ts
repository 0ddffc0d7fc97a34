import type { CompiledQuery } from 'kysely';
import { ASYNCHRONOUS_COMMIT } from '../../db/asynchronousCommit.ts';
import { GENERIC_PLANS } from '../../db/genericPlans.ts';

/**
 * The planner settings of the lane's own transactions (SET LOCAL: they end
 * with the transaction).
 *
 * NO_SEQ_SCANS, from each transaction's start: every statement a lane's
 * transaction runs finds its rows by key (the drain's statements, their
 * plpgsql functions' queries, the foreign-key checks of its inserts, a
 * decision's reads under row locks), and some of their plans are made once
 * and kept (a function's queries, a foreign-key check, the drain's
 * prepared statements). A plan made while a table was a page or two (a fresh
 * database, analyzed early) scans the table, and goes on scanning it as it
 * grows until something invalidates the plan: the foreign-key checks on
 * `commands` first planned when a blueprint's first decision made its
 * resources went on reading all of `commands` at every follow-up and event.
 * Small tables pay too: a seq scan of `resources` reads every dead version
 * its slot counts leave. With seq scans disabled the planner takes the
 * index wherever there is one (a table with none is still scanned)
 * (test/db/plansOnGrowingTables.test.ts).
 *
 * GENERIC_PLANS (src/db/genericPlans.ts), only where the drain's own
 * prepared statements run (this folder). A decision's Kysely queries send the
 * constants partial indexes match as parameters: they run before the
 * commit sets it (test/db/preparedStatements.test.ts).
 */
export const NO_SEQ_SCANS = "set_config('enable_seqscan', 'off', true)";
export const settings = (...configs: string[]) => `select ${configs.join(', ')}`;

/** Opens a transaction of its own that commits without waiting for its WAL flush (for hints that may be lost in a crash); `commit` closes it. */
export const ASYNCHRONOUS_BEGIN: readonly string[] = ['begin', settings(ASYNCHRONOUS_COMMIT, NO_SEQ_SCANS, GENERIC_PLANS)];

/** Statements in such a transaction. */
export function asynchronously(statements: readonly (string | CompiledQuery)[]): (string | CompiledQuery)[] {
  return [...ASYNCHRONOUS_BEGIN, ...statements, 'commit'];
}
