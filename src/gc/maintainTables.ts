import { maintainTable } from '../db/maintainTable.ts';
import { type MaintenanceDue, maintenanceDue } from '../db/maintenanceDue.ts';
import { readAutovacuumSettings, readTableStatistics } from '../db/tableStatistics.ts';
import { recordTableMaintained } from '../metrics/metrics.ts';
import type { GcPass, StepReport } from './GcPass.ts';

/**
 * Vacuums or analyzes each of Slipway's tables (graphile-worker's among
 * them) that autovacuum does not look after and that passed autovacuum's
 * own thresholds (maintenanceDue), one table at a time, each in a
 * statement of its own. A table autovacuum looks after is left to it. The
 * collector's lock keeps it to one pass, so one worker, at a time; a pass
 * out of time leaves the rest to the next.
 */
export async function maintainTables(pass: GcPass): Promise<StepReport> {
  if (!pass.settings.maintainTables) return { found: 0, actions: [], truncated: false };
  const due = maintenanceDue(await readAutovacuumSettings(pass.db), await readTableStatistics(pass.db));
  const maintained: MaintenanceDue[] = [];
  for (const table of due) {
    if (pass.outOfTime) return { found: due.length, actions: [], maintained, truncated: true };
    const started = Date.now();
    await maintainTable(pass.db, table.table, table.maintenance);
    maintained.push(table);
    recordTableMaintained(table.table, table.maintenance);
    pass.log.info(
      { pass: pass.passId, ...table, ms: Date.now() - started },
      `${table.maintenance === 'vacuum' ? 'vacuumed' : 'analyzed'} ${table.table}`,
    );
  }
  return { found: due.length, actions: [], maintained, truncated: false };
}
