import { runMigrations } from 'graphile-worker';
import { Migrator } from 'kysely';
import { migrations } from '../../migrations/index.ts';
import type { Logger } from '../log.ts';
import { graphileLogger } from '../worker/graphileLogger.ts';
import type { Database } from './Database.ts';

/**
 * Brings the database up to date: graphile-worker's own schema, then ours.
 * Safe to run from several processes at once (both migrators take locks).
 */
export async function migrate(database: Database, log: Logger): Promise<string[]> {
  await runMigrations({ pgPool: database.pool, logger: graphileLogger(log) });
  const migrator = new Migrator({
    db: database.db,
    provider: { getMigrations: async () => migrations },
  });
  const { error, results } = await migrator.migrateToLatest();
  const applied = (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
  if (error) {
    const failed = (results ?? []).find((r) => r.status === 'Error');
    throw new Error(`migration ${failed?.migrationName ?? '(unknown)'} failed: ${String(error)}`);
  }
  if (applied.length > 0) log.info({ applied }, 'migrations applied');
  return applied;
}
