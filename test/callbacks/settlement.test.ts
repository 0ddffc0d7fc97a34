import { setTimeout as sleep } from 'node:timers/promises';
import { expect, test } from 'vitest';
import type { ObjectKind } from '../../migrations/schema.ts';
import { attachCallback } from '../../src/callbacks/attachCallback.ts';
import { dispatchCallbacks } from '../../src/callbacks/dispatchCallbacks.ts';
import { withTransaction } from '../../src/db/withTransaction.ts';
import { appendInTransaction } from '../../src/queue/appendCommand.ts';
import { Sweeper } from '../../src/worker/Sweeper.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { buildCallbackPayload } from '../../src/api/callbackPayload.ts';
import { handDrainedDatabase } from '../helpers/drainByHand.ts';
import { readCallbacks } from '../../src/read/callbacks.ts';
import { createLeases, releaseLease, simulatedBlueprint } from '../concurrency/support/fixtures.ts';
import { testLog } from '../helpers/testDatabase.ts';
import { attachLater, deliveryJobs, LOOPBACK, releaseWithCallback } from './support/callbackFixtures.ts';

/**
 * When a delivery is queued, seen from graphile-worker's queue. No worker
 * runs here (a run job leaves no row behind): the test drains objects itself
 * with the real drain, one at a time, and looks at the queue in between.
 */
const { database, drain } = handDrainedDatabase({ handOffAfterMs: 1000 });

/** Drains every object with work until no command is queued or running. */
async function drainEverything(): Promise<void> {
  for (let pass = 0; pass < 100; pass++) {
    const busy = await database()
      .db.selectFrom('commands')
      .select(['target_kind', 'target_id'])
      .distinct()
      .where('status', 'in', ['queued', 'running'])
      .execute();
    if (busy.length === 0) return;
    for (const { target_kind, target_id } of busy) await drain().drain(target_kind as ObjectKind, target_id);
  }
  throw new Error('the queues did not empty');
}

async function activeLeases(count: number, name: string) {
  const blueprint = await simulatedBlueprint(database().db, name, { maxResources: count, leasesPerResource: 1 });
  const leases = await createLeases(database().db, blueprint, count);
  await drainEverything();
  return leases;
}

test('a command without a callback queues no delivery job', async () => {
  const [lease] = await activeLeases(1, 'plain');
  await releaseLease(database().db, lease!.id);
  await drainEverything();
  expect(await database().db.selectFrom('command_callbacks').select('id').execute()).toEqual([]);
  expect(await deliveryJobs(database().db)).toBe(0);
});

test('a callback is queued once, when the last command of the tree settles, not when the command itself does', async () => {
  const [lease] = await activeLeases(1, 'hooked');
  const { command } = await releaseWithCallback(database().db, lease!.id, 'http://localhost:9/hook');

  // The lease's drain settles the release (which destroys the lease and
  // gives its slot back); the resource's count of its slots, which the
  // return of its only slot asked for, is still to come.
  await drain().drain('lease', lease!.id);
  const release = await database().db.selectFrom('commands').select('status').where('id', '=', command.id).executeTakeFirstOrThrow();
  expect(release.status).toBe('done');
  expect((await readCallbacks(database().db, command.id))[0]).toMatchObject({ status: 'waiting' });
  expect(await deliveryJobs(database().db)).toBe(0);

  await drainEverything();
  expect((await readCallbacks(database().db, command.id))[0]).toMatchObject({ status: 'pending', attempts: 0 });
  expect(await deliveryJobs(database().db)).toBe(1);
});

test('a callback attached while the last command of its tree settles is queued all the same', async () => {
  const db = database().db;
  const [lease] = await activeLeases(1, 'racing');
  const { command } = await releaseLease(db, lease!.id);
  await drain().drain('lease', lease!.id);
  const { resource_id } = await db.selectFrom('leases').select('resource_id').where('id', '=', lease!.id).executeTakeFirstOrThrow();
  const jobsBefore = await deliveryJobs(db);

  // The attach sees the tree unsettled (count_slots is queued); the drain
  // that settles count_slots runs while the attach's transaction is open.
  let drained: Promise<number> | undefined;
  await db.transaction().execute(async (trx) => {
    const callback = await attachCallback(trx, command.id, 'http://localhost:9/racing', LOOPBACK);
    expect(callback.status).toBe('waiting');
    drained = drain().drain('resource', resource_id!);
    await sleep(300);
  });
  await drained;
  await drainEverything();
  expect((await readCallbacks(db, command.id))[0]).toMatchObject({ status: 'pending' });
  expect(await deliveryJobs(db)).toBe(jobsBefore + 1);
});

test('a command cancelled before it ran settles its callback too, with the outcome cancelled', async () => {
  const db = database().db;
  const blueprint = await simulatedBlueprint(db, 'cancelled', { maxResources: 1, leasesPerResource: 1 });
  const [lease] = await createLeases(db, blueprint, 1);
  // The lease asks again, as it does after a resource refused it; nothing has drained it yet.
  const { command: allocate } = await appendInTransaction(
    db,
    { target: { kind: 'lease', id: lease!.id }, kind: 'allocate', actor: { issuedBy: 'system', source: 'system', reason: 'refused: test' } },
    { fromOutside: false },
  );
  const callback = await attachLater(db, allocate.id, 'http://localhost:9/cancelled');
  expect(callback.status).toBe('waiting');

  // The release goes first and cancels the allocation it makes pointless.
  await releaseLease(db, lease!.id);
  await drainEverything();
  expect((await readCallbacks(db, allocate.id))[0]).toMatchObject({ status: 'pending' });
  const payload = await buildCallbackPayload(db, callback.id, allocate.id);
  expect(payload).toMatchObject({ outcome: 'cancelled', command: { id: allocate.id, kind: 'allocate', status: 'cancelled' } });
  expect(payload.command.message).toMatch(/^superseded by release/);
});

test('two transactions settling the last two commands of a tree at once queue its callback exactly once', async () => {
  const db = database().db;
  // A settled root with two children on different objects, still queued.
  const insert = (values: { kind: string; target_id: number; status?: 'done'; caused_by?: number }) =>
    db
      .insertInto('commands')
      .values({ target_kind: 'lease', issued_by: 'tester', source: 'cli', ...values })
      .returning('id')
      .executeTakeFirstOrThrow();
  const root = await insert({ kind: 'release', target_id: 901, status: 'done' });
  const a = await insert({ kind: 'destroy', target_id: 902, caused_by: root.id });
  const b = await insert({ kind: 'destroy', target_id: 903, caused_by: root.id });
  const callback = await attachLater(db, root.id, 'http://localhost:9/both');
  expect(callback.status).toBe('waiting');
  const jobsBefore = await deliveryJobs(db);

  // Each settles one child and runs the (deferred) trigger before it commits,
  // as at its commit: the second blocks on the first's lock, then sees its commit.
  const first = await database().pool.connect();
  const second = await database().pool.connect();
  try {
    const settle = async (client: typeof first, id: number) => {
      await client.query('begin');
      await client.query(`update commands set status = 'done', finished_at = now() where id = $1`, [id]);
    };
    await settle(first, a.id);
    await settle(second, b.id);
    await first.query('set constraints commands_queue_settled_callbacks immediate');
    const secondChecks = second.query('set constraints commands_queue_settled_callbacks immediate');
    await sleep(300);
    await first.query('commit');
    await secondChecks;
    await second.query('commit');
  } finally {
    first.release();
    second.release();
  }
  expect((await readCallbacks(db, root.id))[0]).toMatchObject({ status: 'pending' });
  // Neither commit queued the job (no NOTIFY in a durable commit); the dispatch after them does, once.
  expect(await deliveryJobs(db)).toBe(jobsBefore);
  expect(await dispatchCallbacks(db)).toBe(1);
  expect(await dispatchCallbacks(db)).toBe(0);
  expect(await deliveryJobs(db)).toBe(jobsBefore + 1);
});

test('the durable commit that makes a delivery due queues no job; the dispatch after it does, and a lost dispatch is made by the sweeper', async () => {
  const db = database().db;
  const [lease] = await activeLeases(2, 'dispatched');
  const { command } = await releaseLease(db, lease!.id);
  await drainEverything();

  // Attached to a settled tree: due at once. Inside the transaction there is no job yet.
  const jobsBefore = await deliveryJobs(db);
  await withTransaction(db, async (trx) => {
    const callback = await attachCallback(trx, command.id, 'http://localhost:9/dispatched', LOOPBACK);
    expect(callback).toMatchObject({ status: 'pending', job_queued: false });
    expect(await deliveryJobs(trx)).toBe(jobsBefore);
  });
  // withTransaction's after-commit hook dispatched it.
  expect(await deliveryJobs(db)).toBe(jobsBefore + 1);

  // A transaction whose after-commit work never runs, as when its process dies right after the commit.
  const { command: other } = await releaseLease(db, (await activeLeases(1, 'lost-dispatch'))[0]!.id);
  await drainEverything();
  await db.transaction().execute((trx) => attachCallback(trx, other.id, 'http://localhost:9/lost', LOOPBACK));
  expect(await deliveryJobs(db)).toBe(jobsBefore + 1);
  const sweeper = new Sweeper(db, testLog, 50, 60_000);
  sweeper.start();
  try {
    await waitFor('the sweeper to queue the lost delivery', async () => (await deliveryJobs(db)) === jobsBefore + 2);
  } finally {
    await sweeper.stop();
  }
  expect((await readCallbacks(db, other.id))[0]).toMatchObject({ status: 'pending' });
});
