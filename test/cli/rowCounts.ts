import { sql } from 'kysely';
import type { Db } from '../../src/db/Database.ts';
import { waitFor } from '../helpers/waitFor.ts';

/**
 * How many rows each table a CLI command could write holds, once earlier
 * tests' commands have settled: to prove that a refused command wrote nothing.
 */
export async function rowCounts(db: Db): Promise<Record<string, number>> {
  await waitFor('earlier commands to settle', async () =>
    !(await db.selectFrom('commands').select('id').where('status', 'in', ['queued', 'running']).executeTakeFirst()),
  );
  const { rows } = await sql<Record<string, number>>`
    select (select count(*) from blueprints)::int as blueprints,
           (select count(*) from leases)::int as leases,
           (select count(*) from resources)::int as resources,
           (select count(*) from commands)::int as commands,
           (select count(*) from events)::int as events
  `.execute(db);
  return rows[0]!;
}
