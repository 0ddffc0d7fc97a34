import { Migrator, sql } from 'kysely';
import { migrations } from '../../migrations/index.ts';
import type { Db } from '../db/Database.ts';

/** Names of this build's migrations not yet applied to the database (all of them on an empty one). */
export async function pendingMigrations(db: Db): Promise<string[]> {
  const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
  const known = await migrator.getMigrations();
  return known.filter((m) => m.executedAt === undefined).map((m) => m.name);
}

/** Names of migrations applied to the database that this build does not know: a later release's (none on an empty one). */
export async function laterMigrations(db: Db): Promise<string[]> {
  const table = await sql<{ found: boolean }>`select to_regclass('public.kysely_migration') is not null as found`.execute(db);
  if (!table.rows[0]?.found) return [];
  const { rows } = await sql<{ name: string }>`select name from public.kysely_migration order by name`.execute(db);
  return rows.map((r) => r.name).filter((name) => !Object.hasOwn(migrations, name));
}
