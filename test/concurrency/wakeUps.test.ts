import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import type pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import type { Db } from '../../src/db/Database.ts';
import type { ObjectRef } from '../../src/db/objectTables.ts';
import { wakeObjects } from '../../src/queue/wakeObjects.ts';
import { Sweeper } from '../../src/worker/Sweeper.ts';
import { createTestDatabase, testLog } from '../helpers/testDatabase.ts';
import { createLeases, simulatedBlueprint } from './support/fixtures.ts';
import type { TestDatabase } from './support/testCluster.ts';

/**
 * How objects get drained at all, with no worker running to blur it: each
 * object has at most one wake-up row, which later wake-ups never push back
 * (under load, a busy object's wake-up would otherwise always be the newest
 * in the backlog), and the sweeper wakes an object nobody drains
 * but leaves one whose drain lock is held, judging by locks in its own
 * database only.
 */
// Two Slipway databases on one server. The sweeper test sweeps `swept`, so
// nothing else may leave commands there; `neighbour` is the other one.
let swept: TestDatabase;
let neighbour: TestDatabase;

beforeAll(async () => {
  [swept, neighbour] = await Promise.all([createTestDatabase(), createTestDatabase()]);
});

afterAll(async () => {
  await Promise.all([swept?.drop(), neighbour?.drop()]);
});

/** When the object's wake-up is due. */
async function wakeUpAt(db: Db, target: ObjectRef): Promise<Date> {
  const { rows } = await sql<{ run_at: Date }>`
    select run_at from drain_wakeups where target_kind = ${target.kind} and target_id = ${target.id}
  `.execute(db);
  expect(rows).toHaveLength(1);
  return rows[0]!.run_at;
}

/** Takes an object's drain lock on a connection of its own, as a drain would; returns the connection. */
async function holdDrainLock(database: TestDatabase, target: ObjectRef): Promise<pg.PoolClient> {
  const client = await database.pool.connect();
  await client.query('select pg_advisory_lock(object_lock_key($1, $2))', [target.kind, target.id]);
  return client;
}

test('a wake-up never moves the pending one later, and may move it earlier', async () => {
  const blueprint = await simulatedBlueprint(neighbour.db, 'woken', { maxResources: 1, leasesPerResource: 1 });
  await createLeases(neighbour.db, blueprint, 1);
  // A new lease's first command is its blueprint's need_resource.
  const target = { kind: 'blueprint', id: blueprint.id } as const;
  const first = await wakeUpAt(neighbour.db, target);
  await sleep(20);

  await wakeObjects(neighbour.db, [target]);
  expect(await wakeUpAt(neighbour.db, target)).toEqual(first);
  await wakeObjects(neighbour.db, [target], new Date(Date.now() + 60_000));
  expect(await wakeUpAt(neighbour.db, target)).toEqual(first);

  const later = { kind: 'blueprint', id: blueprint.id + 1 } as const;
  const inAMinute = new Date(Date.now() + 60_000);
  await wakeObjects(neighbour.db, [later], inAMinute);
  await wakeObjects(neighbour.db, [later]);
  expect((await wakeUpAt(neighbour.db, later)).getTime()).toBeLessThan(inAMinute.getTime());
});

test('the sweeper wakes an object nobody drains, even while another database drains its namesake', async () => {
  const staleAfterMs = 1;
  const blueprint = await simulatedBlueprint(swept.db, 'swept', { maxResources: 1, leasesPerResource: 1 });
  await createLeases(swept.db, blueprint, 1);
  const target = { kind: 'blueprint', id: blueprint.id } as const;
  const sweeper = new Sweeper(swept.db, testLog, 60_000, staleAfterMs);
  await sleep(staleAfterMs + 20);
  // Its wake-up is waiting (no worker runs here): not stranded, only queued.
  expect(await sweeper.sweep()).toBe(0);
  // The wake-up taken, as by a lane whose worker then died: now it is stranded.
  await sql`delete from drain_wakeups where target_kind = 'blueprint' and target_id = ${blueprint.id}`.execute(swept.db);

  const namesake = await holdDrainLock(neighbour, target);
  try {
    expect(await sweeper.sweep()).toBe(1);
  } finally {
    namesake.release(true);
  }

  // Taken again, by a lane that still holds the object: not stranded.
  await sql`delete from drain_wakeups where target_kind = 'blueprint' and target_id = ${blueprint.id}`.execute(swept.db);
  const drain = await holdDrainLock(swept, target);
  try {
    expect(await sweeper.sweep()).toBe(0);
  } finally {
    drain.release(true);
  }
});
