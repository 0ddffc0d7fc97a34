import { runMigrations } from 'graphile-worker';
import { Migrator } from 'kysely';
import { migrations } from '../../migrations/index.ts';
import type { Logger } from '../log.ts';
import { applyFunctions } from './applyFunctions.ts';
import { analyzeUnattendedTables } from './maintainTable.ts';
import { graphileLogger } from '../graphileLogger.ts';
import type { Database } from './Database.ts';

/**
 * Brings the database up to date: graphile-worker's own schema, then ours,
 * then our functions from their files (src/db/applyFunctions.ts). Safe to
 * run from several processes at once (each step takes a lock). When
 * migrations ran and `maintainTables` (SLIPWAY_GC_MAINTAIN_TABLES) holds,
 * the tables autovacuum does not look after are analyzed, so a new
 * database's plans start from statistics.
 */
export async function migrate(database: Database, log: Logger, { maintainTables = true } = {}): Promise<string[]> {
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
  if (applied.length > 0 && maintainTables) await analyzeUnattendedTables(database.db, log);
  const replaced = await applyFunctions(database.db);
  if (replaced.length > 0) log.info({ functions: replaced }, 'functions replaced from src/db/functions/');
  return [...applied, ...replaced.map((name) => `function ${name}`)];
}
