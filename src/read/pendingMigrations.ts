import { Migrator } from 'kysely';
import { migrations } from '../../migrations/index.ts';
import type { Db } from '../db/Database.ts';

/** Names of this build's migrations not yet applied to the database (all of them on an empty one). */
export async function pendingMigrations(db: Db): Promise<string[]> {
  const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
  const known = await migrator.getMigrations();
  return known.filter((m) => m.executedAt === undefined).map((m) => m.name);
}
