import { parseCronItems, type ParsedCronItem, type TaskList } from 'graphile-worker';
import type { Config } from '../config.ts';
import type { Database } from '../db/Database.ts';
import { gcSettings, runCollectorPass } from '../gc/runCollector.ts';
import type { Logger } from '../log.ts';

export const GC_TASK = 'slipway_gc';

/** The collector's task: one pass, recorded in gc_passes. */
export function gcTasks(database: Database, config: Config, log: Logger): TaskList {
  return {
    [GC_TASK]: async () => {
      await runCollectorPass(database, gcSettings(config), 'schedule', log.child({ task: GC_TASK }));
    },
  };
}

/**
 * The collector's schedule on graphile-worker's crontab: every worker
 * registers the same item, and graphile-worker's cron (its known_crontabs
 * row, keyed by the identifier) schedules each run once across all of them.
 * No backfill: a pass missed while no worker ran is not worth catching up,
 * the next one does the same work. Every N minutes (0: no schedule; passes
 * then run only by hand with `slipway gc run`).
 */
export function gcCronItems(config: Config): ParsedCronItem[] {
  const minutes = config.SLIPWAY_GC_INTERVAL_MINUTES;
  if (minutes === 0) return [];
  const match = minutes === 60 ? '0 * * * *' : `*/${minutes} * * * *`;
  return parseCronItems([{ task: GC_TASK, identifier: GC_TASK, match, options: { backfillPeriod: 0, maxAttempts: 1 } }]);
}
