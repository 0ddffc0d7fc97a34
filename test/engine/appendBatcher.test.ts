import { sql } from 'kysely';
import { afterAll, beforeAll, expect, test } from 'vitest';
import type { Actor } from '../../src/domain/Actor.ts';
import { NotFoundError } from '../../src/domain/errors.ts';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { AppendBatcher } from '../../src/queue/AppendBatcher.ts';
import { createTestDatabase, testLog } from '../helpers/testDatabase.ts';

// No worker runs in this file: what the batcher appended stays queued.
const alice: Actor = { issuedBy: 'alice@host', source: 'api', reason: 'done with it' };
const options = { fromOutside: true, queueLimit: 100 } as const;
let database: Awaited<ReturnType<typeof createTestDatabase>>;
let batcher: AppendBatcher;

beforeAll(async () => {
  database = await createTestDatabase({ poolSize: 10 });
  await createBlueprint(database.db, { name: 'pool', driver: 'simulated', maxResources: 1 }, alice);
  batcher = new AppendBatcher(database.pool, database.db, testLog);
});
afterAll(async () => database?.drop());

const newLeases = (n: number) =>
  Promise.all(Array.from({ length: n }, async () => (await createLease(database.db, { blueprint: 'pool', holder: 'alice' }, alice)).lease.id));
const release = (id: number, actor = alice) => batcher.append({ target: { kind: 'lease', id }, kind: 'release', actor }, options);
const releasesOf = async (ids: readonly number[]) =>
  (
    await sql<{ target_id: number; status: string; tx: string }>`
      select target_id::int, status, xmin::text as tx from commands where kind = 'release' and target_id = any(${ids}::bigint[])
    `.execute(database.db)
  ).rows;

test('concurrent appends go in shared transactions, and each caller gets its own answer', async () => {
  const distinct = await newLeases(30);
  const [contested] = await newLeases(1);
  const answers = await Promise.allSettled([
    ...distinct.map((id) => release(id)),
    ...Array.from({ length: 20 }, () => release(contested!)),
    release(2_000_000_000),
  ]);

  const results = answers.slice(0, 50).map((a) => (a.status === 'fulfilled' ? a.value : expect.fail(String((a as PromiseRejectedResult).reason))));
  // One fresh release per distinct lease, each its own command.
  expect(results.slice(0, 30).map((r) => [r.command.target_id, r.coalesced])).toEqual(distinct.map((id) => [id, false]));
  // The contested lease's first release is the command, the other 19 joined it.
  const contestedResults = results.slice(30);
  expect(new Set(contestedResults.map((r) => r.command.id)).size).toBe(1);
  expect(contestedResults.filter((r) => !r.coalesced)).toHaveLength(1);
  expect(new Set(contestedResults.map((r) => r.record.id)).size).toBe(20);
  // The unknown lease is refused on its own.
  expect((answers[50] as PromiseRejectedResult).reason).toBeInstanceOf(NotFoundError);

  const written = await releasesOf([...distinct, contested!]);
  expect(
    written
      .filter((r) => r.status === 'queued')
      .map((r) => r.target_id)
      .sort(),
  ).toEqual([...distinct, contested!].sort());
  // Rows written in one transaction share its id: 51 appends took a few, not 51.
  expect(new Set(written.map((r) => r.tx)).size).toBeLessThan(10);
});

test('a batch waiting for a lock does not hold up the appends behind it: they go in a second batch beside it', async () => {
  const [locked, free] = await newLeases(2);
  const holder = await database.pool.connect();
  try {
    // A drain deciding about the lease holds its row so; the append's share lock waits for it.
    await holder.query('begin');
    await holder.query('select 1 from leases where id = $1 for update', [locked]);
    let blockedDone = false;
    const blocked = release(locked!).finally(() => {
      blockedDone = true;
    });
    // Once its batch is waiting for the lock (not before, or both would share it).
    await expect
      .poll(async () => (await holder.query("select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock'")).rows[0].n, {
        timeout: 10_000,
      })
      .toBe(1);
    const other = await release(free!);
    expect([other.command.target_id, other.coalesced, blockedDone]).toEqual([free, false, false]);
    await holder.query('commit');
    expect((await blocked).command.target_id).toBe(locked);
  } finally {
    holder.release();
  }
});

test('a batch that fails as a whole is made again one append at a time: the bad one fails alone, the rest are written once', async () => {
  const ids = await newLeases(12);
  // The commands table accepts only known sources: this append fails in the database itself.
  const bogus = { ...alice, source: 'carrier-pigeon' } as unknown as Actor;
  const answers = await Promise.allSettled(ids.map((id, n) => release(id, n === 5 ? bogus : alice)));

  expect(answers.map((a) => a.status)).toEqual(ids.map((_, n) => (n === 5 ? 'rejected' : 'fulfilled')));
  expect(String((answers[5] as PromiseRejectedResult).reason)).toMatch(/check constraint/);
  const written = await releasesOf(ids);
  expect(written.map((r) => r.target_id).sort()).toEqual(ids.filter((_, n) => n !== 5).sort());
  // The first two went alone; the other ten were one batch, which failed:
  // its good appends were then made one transaction each.
  expect(new Set(written.map((r) => r.tx)).size).toBe(11);
});

test('a batch whose connection fails is not made again (it may have committed): its callers get the error', async () => {
  const [id] = await newLeases(1);
  const locker = await database.pool.connect();
  try {
    // Holding the lease's row makes the append wait on it, so its backend can be ended mid-batch.
    await locker.query('begin');
    await locker.query('select 1 from leases where id = $1 for update', [id]);
    const answer = release(id!).then(
      () => 'answered',
      (error: Error) => error.message,
    );
    let ended = false;
    for (let tries = 0; !ended && tries < 100; tries++) {
      const { rows } = await database.pool.query(
        `select pg_terminate_backend(pid) as ended from pg_stat_activity
         where datname = current_database() and wait_event_type = 'Lock' and pid <> pg_backend_pid()`,
      );
      ended = rows.length > 0;
      if (!ended) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(ended).toBe(true);
    expect(await answer).toMatch(/terminat/);
  } finally {
    await locker.query('rollback');
    locker.release();
  }
  expect(await releasesOf([id!])).toEqual([]);
});
