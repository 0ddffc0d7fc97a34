import { sql } from 'kysely';
import type { Db } from '../../src/db/Database.ts';
import { waitFor } from '../helpers/waitFor.ts';

/**
 * The worker settings of a file that counts rows: the collector's schedule
 * off, since a scheduled pass is a writer of its own (it records itself in
 * `gc_passes`) that may run between the two counts.
 */
export const NO_SCHEDULED_COLLECTOR = { SLIPWAY_GC_INTERVAL_MINUTES: '0' } as const;

/**
 * How many rows every table of Slipway's schema holds (and, for a table with
 * an integer `version` column, the sum of its rows' versions, which any update
 * raises), once earlier tests' commands have settled: to prove that a
 * refused request or command wrote nothing.
 */
export async function rowCounts(db: Db): Promise<Record<string, number>> {
  await waitFor(
    'earlier commands to settle',
    async () => !(await db.selectFrom('commands').select('id').where('status', 'in', ['queued', 'running']).executeTakeFirst()),
  );
  const { rows: tables } = await sql<{ name: string; versioned: boolean }>`
    select t.table_name as name,
           exists (select from information_schema.columns c
                   where c.table_schema = t.table_schema and c.table_name = t.table_name and c.column_name = 'version'
                     -- The objects' row versions (workers.version is the Slipway version they run).
                     and c.data_type in ('integer', 'bigint')) as versioned
    from information_schema.tables t
    where t.table_schema = 'public' and t.table_type = 'BASE TABLE' and t.table_name not like 'kysely_%'
    order by t.table_name
  `.execute(db);
  const counts: Record<string, number> = {};
  for (const { name, versioned } of tables) {
    const table = sql.table(name);
    const { rows } = await sql<{ n: number; versions: number }>`
      select count(*)::int as n, ${versioned ? sql`coalesce(sum(version), 0)::bigint` : sql`0::bigint`} as versions from ${table}
    `.execute(db);
    counts[name] = rows[0]!.n;
    if (versioned) counts[`${name} versions`] = rows[0]!.versions;
  }
  return counts;
}
