import { sql } from 'kysely';
import type { Logger } from '../log.ts';
import type { Db } from './Database.ts';
import { type Maintenance, unattendedTables } from './maintenanceDue.ts';
import { readAutovacuumSettings, readTableStatistics } from './tableStatistics.ts';

/**
 * The statement of each maintenance. Without the truncation at a vacuum's
 * end: it takes the table's exclusive lock, which would make the service's
 * own statements on it wait, and a queue table's emptied pages are filled
 * again soon enough. Neither statement takes a lock that writes or reads
 * wait for.
 */
const STATEMENT: Readonly<Record<Maintenance, string>> = {
  vacuum: 'vacuum (analyze, truncate false)',
  analyze: 'analyze',
};

/**
 * Vacuums or analyzes one table, `table` as readTableStatistics names it
 * (PostgreSQL's own quoting). A statement of its own, outside any
 * transaction (VACUUM refuses to run in one), on a connection the pool
 * lends it for that statement only.
 */
export async function maintainTable(db: Db, table: string, maintenance: Maintenance): Promise<void> {
  await sql.raw(`${STATEMENT[maintenance]} ${table}`).execute(db);
}

/**
 * Analyzes each of Slipway's tables that autovacuum does not look after:
 * for after the migrations made or changed tables, since the planner
 * otherwise plans on a new table's guessed size until someone analyzes it.
 */
export async function analyzeUnattendedTables(db: Db, log: Logger): Promise<void> {
  const unattended = unattendedTables(await readAutovacuumSettings(db), await readTableStatistics(db));
  for (const { table } of unattended) await maintainTable(db, table, 'analyze');
  if (unattended.length > 0)
    log.info({ tables: unattended.map((t) => t.table) }, 'analyzed the tables autovacuum does not look after, after migrating');
}
