import { sql } from 'kysely';
import type pg from 'pg';
import type { GcPassRow } from '../../migrations/schema.ts';
import type { Config } from '../config.ts';
import type { Database } from '../db/Database.ts';
import type { Logger } from '../log.ts';
import { recordCollectorPass } from '../metrics/metrics.ts';
import { checkResources } from './checkResources.ts';
import { expireLeases } from './expireLeases.ts';
import { findOrphans } from './findOrphans.ts';
import { maintainTables } from './maintainTables.ts';
import { GcPass, type GcSettings, type StepReport } from './GcPass.ts';
import { PRUNED, pruneHistory } from './pruneHistory.ts';
import { reclaimIdleResources } from './reclaimIdleResources.ts';
import { sampleUsage } from './sampleUsage.ts';
import { topUpWarmMinimum } from './topUpWarmMinimum.ts';

/**
 * The steps of a pass, in order: leases that ran out first (their releases
 * free capacity), then reclaims for leases still waiting, then the warm
 * minimum, then the resources' checks, then what drivers hold that no
 * resource stands for, then history, then a sample of use for the web
 * UI's charts, and last the tables autovacuum does not look after (the
 * pruning's dead rows among them).
 */
const STEPS = {
  expireLeases,
  reclaimIdleResources,
  topUpWarmMinimum,
  checkResources,
  findOrphans,
  pruneHistory,
  sampleUsage,
  maintainTables,
} as const;
export type StepName = keyof typeof STEPS;

export type GcTrigger = GcPassRow['trigger'];

export interface GcPassReport {
  readonly id: number;
  readonly trigger: GcTrigger;
  readonly status: GcPassRow['status'];
  readonly startedAt: Date;
  readonly finishedAt: Date | null;
  readonly message: string | null;
  readonly steps: Partial<Record<StepName, StepReport>>;
}

/**
 * One pass at a time across all workers and CLIs: graphile-worker's cron
 * already runs a schedule once, but `slipway gc run` may overlap it. A pass
 * that finds another running records itself as skipped. A session lock on
 * its own connection, so it goes if this process dies.
 */
const COLLECTOR_LOCK_SQL = `select pg_try_advisory_lock(x'534c4743'::bigint) as locked`;
const COLLECTOR_UNLOCK_SQL = `select pg_advisory_unlock(x'534c4743'::bigint)`;

/** How many actions of one step a pass record keeps (the counts are always whole). */
const ACTIONS_KEPT = 100;

export function gcSettings(config: Config): GcSettings {
  return {
    idleGraceMs: config.SLIPWAY_GC_IDLE_GRACE_MS,
    retentionMs: config.SLIPWAY_GC_RETENTION_DAYS * 24 * 3600 * 1000,
    batchSize: config.SLIPWAY_GC_BATCH_SIZE,
    budgetMs: config.SLIPWAY_GC_PASS_BUDGET_MS,
    orphanGraceMs: config.SLIPWAY_GC_ORPHAN_GRACE_MS,
    maintainTables: config.SLIPWAY_GC_MAINTAIN_TABLES,
  };
}

/**
 * Runs one collector pass and records it in gc_passes: when, why, and what
 * each step found and asked for. The collector never writes an object's
 * row: every action is a command appended as `system:gc`.
 */
export async function runCollectorPass(
  database: Pick<Database, 'pool' | 'db'>,
  settings: GcSettings,
  trigger: GcTrigger,
  log: Logger,
): Promise<GcPassReport> {
  const { db } = database;
  const record = await db.insertInto('gc_passes').values({ trigger }).returningAll().executeTakeFirstOrThrow();
  const client: pg.PoolClient = await database.pool.connect();
  const steps: Partial<Record<StepName, StepReport>> = {};
  let status: GcPassRow['status'] = 'done';
  let message: string | null = null;
  let failure: Error | undefined;
  try {
    const { rows } = await client.query<{ locked: boolean }>(COLLECTOR_LOCK_SQL);
    if (!rows[0]?.locked) {
      status = 'skipped';
      message = 'another collector pass was running';
    } else {
      try {
        const pass = new GcPass(db, settings, record.id, log);
        for (const [name, step] of Object.entries(STEPS) as Array<[StepName, (p: GcPass) => Promise<StepReport>]>) {
          steps[name] = await step(pass);
        }
      } catch (error) {
        status = 'failed';
        message = (error as Error).message;
        log.error({ err: error, pass: record.id }, 'collector pass failed');
      } finally {
        await client.query(COLLECTOR_UNLOCK_SQL);
      }
    }
  } catch (error) {
    failure = error as Error;
    throw error;
  } finally {
    client.release(failure);
  }
  const kept = Object.fromEntries(Object.entries(steps).map(([name, step]) => [name, { ...step, actions: step.actions.slice(0, ACTIONS_KEPT) }]));
  const finished = await db
    .updateTable('gc_passes')
    .set({ status, message, report: JSON.stringify(kept), finished_at: sql<Date>`now()` })
    .where('id', '=', record.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  log.info({ pass: finished.id, status, trigger }, 'collector pass finished');
  recordCollectorPass(status, Object.fromEntries(Object.entries(steps).map(([name, step]) => [name, step.actions.length])));
  return toReport(finished);
}

/** A pass record as a report, its steps and counts in pass order (jsonb keeps keys in an order of its own). */
export function toReport(row: GcPassRow): GcPassReport {
  const stored = row.report as Partial<Record<StepName, StepReport>>;
  const steps = Object.fromEntries(
    (Object.keys(STEPS) as StepName[])
      .filter((name) => stored[name] !== undefined)
      .map((name) => {
        const step = stored[name]!;
        const pruned = step.pruned && Object.fromEntries(PRUNED.map((what) => [what, step.pruned![what] ?? 0]));
        return [name, { ...step, ...(pruned ? { pruned } : {}) }];
      }),
  );
  return {
    id: row.id,
    trigger: row.trigger,
    status: row.status,
    startedAt: row.started_at,
    finishedAt: row.finished_at,
    message: row.message,
    steps,
  };
}

/** The most recent passes, newest first. */
export async function recentPasses(db: Database['db'], limit: number): Promise<GcPassReport[]> {
  const rows = await db.selectFrom('gc_passes').selectAll().orderBy('id', 'desc').limit(limit).execute();
  return rows.map(toReport);
}
