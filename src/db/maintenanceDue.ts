import { z } from 'zod';

/**
 * The server's autovacuum settings, by PostgreSQL's own names: whether
 * autovacuum runs, and the thresholds at which it would vacuum or analyze
 * a table. A table's storage parameters of the same names override them.
 */
export const AutovacuumSettingsSchema = z.object({
  autovacuum: z.enum(['on', 'off']).transform((value) => value === 'on'),
  autovacuum_vacuum_threshold: z.coerce.number().min(0),
  autovacuum_vacuum_scale_factor: z.coerce.number().min(0),
  autovacuum_analyze_threshold: z.coerce.number().min(0),
  autovacuum_analyze_scale_factor: z.coerce.number().min(0),
  // -1 turns vacuums for inserts off.
  autovacuum_vacuum_insert_threshold: z.coerce.number().min(-1),
  autovacuum_vacuum_insert_scale_factor: z.coerce.number().min(0),
});
export type AutovacuumSettings = z.infer<typeof AutovacuumSettingsSchema>;

/** One table's size and changes, as pg_class and pg_stat_user_tables count them. */
export const TableStatisticsSchema = z.object({
  /** Its name as PostgreSQL prints it (regclass): quoted and qualified as a statement needs. */
  table: z.string().min(1),
  /** Its storage parameters (`name=value`), or null. */
  options: z.array(z.string()).nullable(),
  /** pg_class.reltuples: -1 before the table was first vacuumed or analyzed. */
  reltuples: z.coerce.number(),
  deadRows: z.coerce.number().int().min(0),
  modifiedSinceAnalyze: z.coerce.number().int().min(0),
  insertedSinceVacuum: z.coerce.number().int().min(0),
});
export type TableStatistics = z.infer<typeof TableStatisticsSchema>;

/** What a table is given: `vacuum` is VACUUM (ANALYZE), as autovacuum would do both at once when both are due. */
export type Maintenance = 'vacuum' | 'analyze';

export interface MaintenanceDue {
  readonly table: string;
  readonly maintenance: Maintenance;
  /** Which count passed which threshold, for the log and the pass's record. */
  readonly reason: string;
}

/** The settings a table's storage parameters may override, as autovacuum reads them. */
const OVERRIDABLE = [
  'autovacuum_vacuum_threshold',
  'autovacuum_vacuum_scale_factor',
  'autovacuum_analyze_threshold',
  'autovacuum_analyze_scale_factor',
  'autovacuum_vacuum_insert_threshold',
  'autovacuum_vacuum_insert_scale_factor',
] as const satisfies ReadonlyArray<keyof AutovacuumSettings>;

function storageParameters(table: TableStatistics): Map<string, string> {
  return new Map((table.options ?? []).map((option) => option.split('=', 2) as [string, string]));
}

/** True when autovacuum looks after the table: on for the server, and not turned off for the table. */
export function autovacuumLooksAfter(settings: AutovacuumSettings, table: TableStatistics): boolean {
  return settings.autovacuum && storageParameters(table).get('autovacuum_enabled') !== 'false';
}

/** The tables of `tables` that autovacuum does not look after. */
export function unattendedTables(settings: AutovacuumSettings, tables: readonly TableStatistics[]): TableStatistics[] {
  return tables.filter((table) => !autovacuumLooksAfter(settings, table));
}

/**
 * What each table that autovacuum does not look after needs now, by
 * autovacuum's own rule (relation_needs_vacanalyze): a vacuum once its dead
 * rows pass `threshold + scale factor × rows`, or its inserts since the
 * last vacuum pass the insert threshold reckoned alike; otherwise an
 * analyze once its rows changed since the last analyze pass the analyze
 * threshold. A table autovacuum looks after is never in the answer.
 * Wraparound is left out: PostgreSQL runs those vacuums even with
 * autovacuum off.
 */
export function maintenanceDue(settings: AutovacuumSettings, tables: readonly TableStatistics[]): MaintenanceDue[] {
  return unattendedTables(settings, tables).flatMap((table): MaintenanceDue[] => {
    const own = storageParameters(table);
    const setting = (name: (typeof OVERRIDABLE)[number]) => {
      const value = own.get(name);
      return value === undefined ? settings[name] : Number(value);
    };
    // A table never vacuumed nor analyzed counts as empty, as autovacuum counts it.
    const rows = Math.max(table.reltuples, 0);
    const vacuumAt = setting('autovacuum_vacuum_threshold') + setting('autovacuum_vacuum_scale_factor') * rows;
    const insertThreshold = setting('autovacuum_vacuum_insert_threshold');
    const insertsAt = insertThreshold + setting('autovacuum_vacuum_insert_scale_factor') * rows;
    const analyzeAt = setting('autovacuum_analyze_threshold') + setting('autovacuum_analyze_scale_factor') * rows;
    const due = (maintenance: Maintenance, reason: string): MaintenanceDue[] => [{ table: table.table, maintenance, reason }];
    if (table.deadRows > vacuumAt) return due('vacuum', `${table.deadRows} dead rows, over ${Math.floor(vacuumAt)}`);
    if (insertThreshold >= 0 && table.insertedSinceVacuum > insertsAt)
      return due('vacuum', `${table.insertedSinceVacuum} rows inserted since the last vacuum, over ${Math.floor(insertsAt)}`);
    if (table.modifiedSinceAnalyze > analyzeAt)
      return due('analyze', `${table.modifiedSinceAnalyze} rows changed since the last analyze, over ${Math.floor(analyzeAt)}`);
    return [];
  });
}
