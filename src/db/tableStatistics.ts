import { sql } from 'kysely';
import type { DB } from '../../migrations/schema.ts';
import type { Db } from './Database.ts';
import { type AutovacuumSettings, AutovacuumSettingsSchema, type TableStatistics, TableStatisticsSchema } from './maintenanceDue.ts';

/**
 * Slipway's tables in its schema (`public`), which the database may share
 * with tables that are not Slipway's. Spelled as a record of the row
 * types' tables, so a table added to migrations/schema.ts and not here (or
 * the other way round) fails to compile.
 */
const SLIPWAY_TABLES = Object.keys({
  blueprints: true,
  orphans: true,
  resources: true,
  leases: true,
  resource_slots: true,
  blueprint_waiters: true,
  commands: true,
  drain_wakeups: true,
  events: true,
  workers: true,
  simulated_effects: true,
  static_pool_claims: true,
  command_callbacks: true,
  callback_attempts: true,
  gc_passes: true,
  usage_samples: true,
  blueprint_usage_samples: true,
  api_tokens: true,
  teams: true,
  team_usage: true,
  preemptions: true,
  reservations: true,
  quotas: true,
  team_events: true,
  idempotency_keys: true,
  web_sessions: true,
} satisfies Record<keyof DB, true>);

/** graphile-worker's schema, every table of which is its jobs' bookkeeping for Slipway. */
const GRAPHILE_WORKER_SCHEMA = 'graphile_worker';

/** The server's autovacuum settings, as they hold for Slipway's sessions. */
export async function readAutovacuumSettings(db: Db): Promise<AutovacuumSettings> {
  const names = Object.keys(AutovacuumSettingsSchema.shape);
  const { rows } = await sql<{ name: string; setting: string }>`select name, setting from pg_settings where name = any(${names}::text[])`.execute(db);
  return AutovacuumSettingsSchema.parse(Object.fromEntries(rows.map((row) => [row.name, row.setting])));
}

/**
 * Each of Slipway's tables and graphile-worker's, with its storage
 * parameters, size and changes: what maintenanceDue decides on. Counts a
 * table has none of yet (before its first statistics) are zero.
 */
export async function readTableStatistics(db: Db): Promise<TableStatistics[]> {
  const { rows } = await sql<Record<string, unknown>>`
    select c.oid::regclass::text as "table", c.reloptions as options, c.reltuples,
           coalesce(s.n_dead_tup, 0) as "deadRows",
           coalesce(s.n_mod_since_analyze, 0) as "modifiedSinceAnalyze",
           coalesce(s.n_ins_since_vacuum, 0) as "insertedSinceVacuum"
      from pg_class c
      left join pg_stat_user_tables s on s.relid = c.oid
     where c.relkind = 'r'
       and (c.relnamespace = to_regnamespace(${GRAPHILE_WORKER_SCHEMA})
            or (c.relnamespace = 'public'::regnamespace and c.relname = any(${SLIPWAY_TABLES}::text[])))
     order by c.oid::regclass::text
  `.execute(db);
  return rows.map((row) => TableStatisticsSchema.parse(row));
}
