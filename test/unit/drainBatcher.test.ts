import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { DrainBatcher } from '../../src/drain/DrainBatcher.ts';
import { ObjectDrain } from '../../src/drain/ObjectDrain.ts';
import { DriverRegistry } from '../../src/drivers/registry.ts';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { appendCommand } from '../../src/queue/appendCommand.ts';
import { stateEvents } from '../helpers/objectHistory.ts';
import { createTestDatabase, testLog } from '../helpers/testDatabase.ts';
import { waitFor } from '../helpers/waitFor.ts';

// The batched drain run by hand, with no graphile-worker: drain() is what a
// drain job calls. Leases released while they wait for a slot (release, then
// destroy) are decided with no I/O, so they stay in the batch.
const alice = { issuedBy: 'alice@host', source: 'cli' } as const;
let database: Awaited<ReturnType<typeof createTestDatabase>>;
let batcher: DrainBatcher;
const db = () => database.db;

beforeAll(async () => {
  database = await createTestDatabase({ poolSize: 12 });
  const drivers = new DriverRegistry({ query: (text, values) => database.pool.query(text, values) });
  const perObject = new ObjectDrain(database.pool, drivers, testLog, { chaosDelayMs: 0, handOffAfterMs: 60_000 });
  batcher = new DrainBatcher(database.pool, perObject, testLog, { chaosDelayMs: 0, aloneAtOnce: 3 });
});
afterAll(async () => database?.drop());

/** `count` pending leases on a blueprint that never makes a resource, each with its allocate and a release queued. */
async function releasedWhileWaiting(name: string, count: number): Promise<number[]> {
  await createBlueprint(db(), { name, driver: 'simulated', settings: {}, maxResources: 1, leasesPerResource: 1 }, alice);
  const ids: number[] = [];
  for (let i = 0; i < count; i++) {
    const { lease } = await createLease(db(), { blueprint: name, holder: `h${i}` }, alice);
    await appendCommand(db(), { target: { kind: 'lease', id: lease.id }, kind: 'release', actor: alice });
    ids.push(lease.id);
  }
  return ids;
}

/** Each lease's commands as `kind:status`, in order, and the transactions (xmin) that settled its release. */
async function commandsOf(ids: readonly number[]) {
  const rows = await sql<{ target_id: number; kind: string; status: string; xmin: string }>`
    select target_id, kind, status, xmin::text from commands where target_kind = 'lease' and target_id = any(${ids}::bigint[]) order by id
  `.execute(db());
  return rows.rows;
}

async function expectReleasedOnce(ids: readonly number[]): Promise<void> {
  const commands = await commandsOf(ids);
  for (const id of ids) {
    expect(commands.filter((c) => c.target_id === id).map((c) => `${c.kind}:${c.status}`)).toEqual([
      'allocate:cancelled',
      'release:done',
      'destroy:done',
    ]);
    expect(await stateEvents(db(), 'lease', id)).toEqual(['pending→released', 'released→destroyed']);
  }
  const locks = await sql<{ n: number }>`
    select count(*)::int as n from pg_locks where locktype = 'advisory' and database = (select oid from pg_database where datname = current_database())
  `.execute(db());
  expect(locks.rows[0]!.n).toBe(0);
}

describe('the batched drain', () => {
  test('drains many leases in shared transactions, each command once, and announces each after its commit', async () => {
    const ids = await releasedWhileWaiting('batched', 30);
    const listener = await database.pool.connect();
    const notices: { id: number; status: string; committed: string | undefined }[] = [];
    const reads: Promise<void>[] = [];
    listener.on('notification', (n) => {
      const notice = JSON.parse(n.payload!) as { id: number; status: string };
      // What a waiter reading on the notice would find.
      reads.push(
        db()
          .selectFrom('commands')
          .select('status')
          .where('id', '=', notice.id)
          .executeTakeFirst()
          .then((row) => void notices.push({ id: notice.id, status: notice.status, committed: row?.status })),
      );
    });
    let applied: number[];
    try {
      await listener.query('listen slipway_commands');
      applied = await Promise.all(ids.map((id) => batcher.drain('lease', id)));
      await waitFor('every notice', async () => (await Promise.all(reads), notices.length >= 60));
    } finally {
      await listener.query('unlisten slipway_commands');
      listener.release();
    }

    expect(applied).toEqual(ids.map(() => 2));
    await expectReleasedOnce(ids);
    // Settled in fewer transactions than leases: the releases went together.
    const releases = (await commandsOf(ids)).filter((c) => c.kind === 'release');
    expect(new Set(releases.map((c) => c.xmin)).size).toBeLessThan(ids.length / 2);
    for (const c of await db().selectFrom('commands').select(['id', 'status']).where('target_id', 'in', ids).where('status', '=', 'done').execute()) {
      expect(notices.filter((n) => n.id === c.id)).toEqual([{ id: c.id, status: 'done', committed: 'done' }]);
    }
  });

  test('a lease whose command calls a driver is handed to the per-object drain, and the rest of the batch goes on', async () => {
    const waiting = await releasedWhileWaiting('mixed', 6);
    await createBlueprint(db(), { name: 'served', driver: 'simulated', settings: {}, maxResources: 1, leasesPerResource: 2 }, alice);
    const { lease: served } = await createLease(db(), { blueprint: 'served', holder: 'bob' }, alice);
    // Allocate, acquire, activate: each needs a query or a driver call.
    await waitFor('the lease to become active', async () => {
      const due = await sql<{ kind: 'lease' | 'resource' | 'blueprint'; id: number }>`
        select distinct target_kind as kind, target_id as id from commands where status = 'queued' and not_before <= now()
      `.execute(db());
      await Promise.all(due.rows.map((o) => batcher.drain(o.kind, o.id)));
      return (await db().selectFrom('leases').select('state').where('id', '=', served.id).executeTakeFirstOrThrow()).state === 'active';
    });
    await appendCommand(db(), { target: { kind: 'lease', id: served.id }, kind: 'release', actor: alice });

    await Promise.all([...waiting, served.id].map((id) => batcher.drain('lease', id)));
    await expectReleasedOnce(waiting);
    const releaseEffects = await sql<{ n: number }>`
      select count(*)::int as n from simulated_effects where operation = 'releaseLease' and object_id = ${served.id}
    `.execute(db());
    expect(releaseEffects.rows[0]!.n).toBe(1);
    expect(await stateEvents(db(), 'lease', served.id)).toEqual(['pending→acquired', 'acquired→active', 'active→released', 'released→destroyed']);
  });

  for (const failure of ['a version moved behind its back', 'its connection terminated'] as const) {
    test(`a step that fails (${failure}) is remade one lease at a time, and nothing is applied twice`, async () => {
      const ids = await releasedWhileWaiting(`failing-${failure.length}`, 8);
      const blocked = ids[3]!;
      // Hold one lease's row, so the batch's commit waits for it.
      const blocker = await database.pool.connect();
      try {
        await blocker.query('begin');
        await blocker.query('select id from leases where id = $1 for update', [blocked]);
        const blockerPid = (await blocker.query('select pg_backend_pid() as pid')).rows[0].pid as number;
        const draining = Promise.all(ids.map((id) => batcher.drain('lease', id)));
        const waiter = await waitFor('the batch to wait for the row', async () =>
          (
            await sql<{ pid: number }>`
              select a.pid from pg_stat_activity a where ${blockerPid}::int = any(pg_blocking_pids(a.pid))
            `.execute(db())
          ).rows[0]?.pid,
        );
        if (failure === 'its connection terminated') await sql`select pg_terminate_backend(${waiter}::int)`.execute(db());
        else await blocker.query('update leases set version = version + 1 where id = $1', [blocked]);
        await blocker.query('commit');
        expect((await draining).reduce((a, b) => a + b, 0)).toBe(2 * ids.length);
      } finally {
        await blocker.query('rollback').catch(() => undefined);
        blocker.release();
      }
      await expectReleasedOnce(ids);
    });
  }
});
