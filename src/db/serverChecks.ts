import type { Logger } from '../log.ts';
import type { Database } from './Database.ts';

/**
 * Warns about server settings Slipway depends on but cannot set for its own
 * sessions (docs/decisions/0030-slipway-sessions-never-jit.md). Queues churn
 * rows (commands, slots, wake-ups): without autovacuum their dead versions
 * are never reclaimed and their statistics never refreshed, so every scan
 * and index lookup slows as the service runs.
 */
export async function warnAboutServerSettings(database: Database, log: Logger): Promise<void> {
  const { rows } = await database.pool.query<{ autovacuum: string }>("select current_setting('autovacuum') as autovacuum");
  if (rows[0]?.autovacuum !== 'on')
    log.warn("autovacuum is off on this PostgreSQL server: Slipway's queue tables will grow and slow down; turn it on (autovacuum = on)");
}
