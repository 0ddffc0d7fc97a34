import { sql } from 'kysely';
import { afterAll, beforeAll } from 'vitest';
import type { ObjectKind } from '../../../migrations/schema.ts';
import type { Db } from '../../../src/db/Database.ts';
import { drainByHand } from '../../helpers/drainByHand.ts';
import type { GcSettings } from '../../../src/gc/GcPass.ts';
import { runCollectorPass } from '../../../src/gc/runCollector.ts';
import type { TestDatabase } from '../../concurrency/support/testCluster.ts';
import { createTestDatabase, testLog } from '../../helpers/testDatabase.ts';

/** Collector settings for tests: no grace, a long retention, small batches. */
export const TEST_GC: GcSettings = {
  idleGraceMs: 0,
  retentionMs: 30 * 24 * 3600 * 1000,
  batchSize: 50,
  budgetMs: 60_000,
  orphanGraceMs: 0,
  maintainTables: true,
};

/**
 * The drain and the collector run by hand, with no graphile-worker, so a
 * test decides exactly what is applied when.
 */
export function handDrain(database: TestDatabase) {
  const drain = drainByHand(database, 60_000);
  const db: Db = database.db;
  return {
    drain,
    /** Drains one object. */
    one: (kind: ObjectKind, id: number) => drain.drain(kind, id),
    /** Drains every object with a ready command until none is left (yielded commands wait). */
    async all(): Promise<void> {
      for (let round = 0; round < 200; round++) {
        const { rows } = await sql<{ kind: ObjectKind; id: number }>`
          select distinct target_kind as kind, target_id as id from commands
          where status in ('queued', 'running') and not_before <= now()
        `.execute(db);
        if (rows.length === 0) return;
        for (const { kind, id } of rows) await drain.drain(kind, id);
      }
      throw new Error('the queues never emptied');
    },
    /** One collector pass. */
    pass: (settings: Partial<GcSettings> = {}) => runCollectorPass(database, { ...TEST_GC, ...settings }, 'cli', testLog),
  };
}

/**
 * A test file's own database with its drain and collector run by hand:
 * made before the file's tests, dropped after them. `hand` may be used
 * from the tests on.
 */
export function handDrainSuite() {
  let database: TestDatabase | undefined;
  let current: ReturnType<typeof handDrain> | undefined;
  beforeAll(async () => {
    database = await createTestDatabase({ poolSize: 10 });
    current = handDrain(database);
  });
  afterAll(async () => database?.drop());
  const made = () => {
    if (!current) throw new Error('the test database is made in beforeAll');
    return current;
  };
  const hand: ReturnType<typeof handDrain> = {
    get drain() {
      return made().drain;
    },
    one: (kind, id) => made().one(kind, id),
    all: () => made().all(),
    pass: (settings) => made().pass(settings),
  };
  return { db: (): Db => database!.db, hand };
}
