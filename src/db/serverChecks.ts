import type { Logger } from '../log.ts';
import type { Db } from './Database.ts';
import { unattendedTables } from './maintenanceDue.ts';
import { readAutovacuumSettings, readTableStatistics } from './tableStatistics.ts';

/**
 * Warns, once at a process's start, about server settings Slipway depends
 * on but cannot set for its own sessions
 * (docs/decisions/0030-slipway-sessions-never-jit.md): autovacuum, off for
 * the server or for some of Slipway's tables. Queues churn rows (commands,
 * slots, wake-ups): without vacuums their dead versions are never
 * reclaimed and without analyzes their statistics never refreshed, so
 * every scan and index lookup slows as the service runs. The collector
 * does that for those tables unless `maintainTables`
 * (SLIPWAY_GC_MAINTAIN_TABLES) is false
 * (docs/decisions/0041-slipway-maintains-tables-autovacuum-does-not.md).
 */
export async function warnAboutServerSettings(db: Db, log: Logger, maintainTables: boolean): Promise<void> {
  const settings = await readAutovacuumSettings(db);
  const unattended = unattendedTables(settings, await readTableStatistics(db)).map((t) => t.table);
  if (unattended.length === 0) return;
  const where = settings.autovacuum ? `autovacuum is off for ${unattended.join(', ')}` : 'autovacuum is off on this PostgreSQL server';
  if (maintainTables)
    log.warn(
      { tables: unattended },
      `${where}: Slipway's collector vacuums and analyzes its tables there itself, at autovacuum's thresholds (SLIPWAY_GC_MAINTAIN_TABLES=false leaves them to you)`,
    );
  else
    log.warn(
      { tables: unattended },
      `${where} and SLIPWAY_GC_MAINTAIN_TABLES is false: Slipway's queue tables will grow and slow down unless you vacuum and analyze them`,
    );
}
