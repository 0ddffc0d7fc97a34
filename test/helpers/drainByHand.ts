import type pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
import type { Database } from '../../src/db/Database.ts';
import type { FreshDatabase } from '../../src/db/freshDatabase.ts';
import type { ObjectKind } from '../../migrations/schema.ts';
import { LANE_SIZE } from '../../src/drain/DrainEngine.ts';
import { DrainLane } from '../../src/drain/DrainLane.ts';
import { DriverRegistry } from '../../src/drivers/registry.ts';
import type { ObjectRef } from '../../src/db/objectTables.ts';
import type { Logger } from '../../src/log.ts';
import { createTestDatabase, testLog } from './testDatabase.ts';

/**
 * The drain engine's lanes run by hand, with no worker, so a test decides
 * exactly what is applied when: `drain` and `together` take only the objects named (and
 * leaves the follow-ups they wake to a later call), `all` drains every due
 * wake-up until none is left (yielded commands wait for theirs).
 * `sidePool`: where the drivers' calls query and the running marks of calls
 * that outlive their step go, if not the lanes' pool (a test that gives the
 * lanes a single connection: they would wait for it forever). `log`: where
 * the lanes log (a test that reads what they say).
 */
export function drainByHand(
  database: Pick<Database, 'pool' | 'db'>,
  handOffAfterMs = 60_000,
  sidePool: pg.Pool = database.pool,
  log: Logger = testLog,
) {
  const drivers = new DriverRegistry({ query: (text, values) => sidePool.query(text, values) });
  const lane = (only?: readonly ObjectRef[]) =>
    new DrainLane(database, drivers, log, {
      maxHeld: LANE_SIZE,
      chaosDelayMs: 0,
      handOffAfterMs,
      stopping: new AbortController().signal,
      marksPool: sidePool,
      ...(only ? { only } : {}),
    });
  return {
    /** Drains one object's ready commands; answers how many it applied (0 when another drain holds it). */
    drain: (kind: ObjectKind, id: number): Promise<number> => lane([{ kind, id }]).run(),
    /** Drains the objects named in one lane, so each step decides a command of each of them in one transaction. */
    together: (objects: readonly ObjectRef[]): Promise<number> => lane(objects).run(),
    async all(): Promise<void> {
      for (let round = 0; round < 200; round++) {
        let claimed = 0;
        await lane().run((n) => (claimed = n));
        if (claimed === 0) return;
      }
      throw new Error('the queues never emptied');
    },
  };
}

export type DrainByHand = ReturnType<typeof drainByHand>;

/**
 * A test file's own database, drained by hand: made before the file's tests
 * and dropped after them. The accessors answer only inside a test or a hook
 * that runs after this one's `beforeAll`.
 */
export function handDrainedDatabase(options: { poolSize?: number; handOffAfterMs?: number } = {}) {
  let made: { database: FreshDatabase; drain: DrainByHand } | undefined;
  beforeAll(async () => {
    const database = await createTestDatabase(options.poolSize === undefined ? {} : { poolSize: options.poolSize });
    made = { database, drain: drainByHand(database, options.handOffAfterMs) };
  });
  afterAll(async () => made?.database.drop());
  const ready = () => {
    if (!made) throw new Error('the hand-drained database is made in beforeAll: use it inside a test');
    return made;
  };
  return {
    database: () => ready().database,
    db: () => ready().database.db,
    drain: () => ready().drain,
  };
}
