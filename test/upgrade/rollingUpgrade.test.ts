import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, rm, symlink } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, expect, test } from 'vitest';
import type { Db } from '../../src/db/Database.ts';
import { UnsupportedVersionError } from '../../src/domain/errors.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { isSettled } from '../../src/read/settled.ts';
import { appendCommand, appendInTransaction } from '../../src/queue/appendCommand.ts';
import { stateTrails } from '../concurrency/support/eventLog.ts';
import { lockHolder } from '../concurrency/support/lockHolder.ts';
import { releaseLease, simulatedBlueprint, tester, waitForLeases } from '../concurrency/support/fixtures.ts';
import { clusterForThisFile } from '../concurrency/support/testCluster.ts';
import { WorkerProcesses } from '../concurrency/support/WorkerProcesses.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { previousRelease } from './previousRelease.ts';

/**
 * Old and new workers side by side on one database, as during a rolling
 * upgrade. The "old" worker of the first test is this build's worker with
 * `renew` v2 taken out of its kinds table (the SLIPWAY_TEST_FORGET_VERSIONS
 * seam of test/helpers/workerProcess.ts); the one of the second test is the
 * previous release itself, checked out from git, running on this release's
 * schema.
 */
const cluster = clusterForThisFile({ workers: 0, poolSize: 5 });

const renewals = (db: Db, ids: readonly number[]) =>
  db
    .selectFrom('commands')
    .select(['id', 'target_id', 'version', 'status', 'message'])
    .where('kind', '=', 'renew')
    .where('id', 'in', [...ids])
    .execute();

async function settled(db: Db, ids: readonly number[]) {
  return waitFor(`${ids.length} renewal(s) to settle`, async () => {
    const rows = await renewals(db, ids);
    return rows.every((r) => isSettled(r.status)) ? rows : undefined;
  });
}

test('commands of both versions flow while old and new workers run: each is run once, by a worker that understands it', async () => {
  const db = cluster.database.db;
  await cluster.workers.start(1, { SLIPWAY_TEST_FORGET_VERSIONS: 'lease.renew.2' });
  const blueprint = await simulatedBlueprint(db, 'rolling', { maxResources: 2, leasesPerResource: 4 });
  const leases = await Promise.all(
    Array.from({ length: 6 }, (_, i) => createLease(db, { blueprint: blueprint.name, holder: `h${i}`, heartbeatMs: 60_000 }, tester)),
  );
  const ids = leases.map((l) => l.lease.id);
  await waitForLeases(db, ids, ['active']);
  const renew = (id: number, payload: Record<string, number>) =>
    appendCommand(db, { target: { kind: 'lease', id }, kind: 'renew', payload, actor: tester });

  // Only the old worker is live: v1 runs; v2 is refused up front, naming what it runs.
  const v1 = await Promise.all(ids.map((id) => renew(id, { expiresInMs: 600_000 })));
  expect(v1.map((r) => r.command.version)).toEqual(ids.map(() => 1));
  expect(
    (
      await settled(
        db,
        v1.map((r) => r.command.id),
      )
    ).map((r) => r.status),
  ).toEqual(ids.map(() => 'done'));
  await expect(renew(ids[0]!, { heartbeatMs: 120_000 })).rejects.toThrow(UnsupportedVersionError);

  // v2 commands already queued (say, accepted while a new worker was up): the old worker leaves them alone.
  const queuedV2 = await Promise.all(
    ids.map((id) =>
      db
        .transaction()
        .execute((trx) =>
          appendInTransaction(
            trx,
            { target: { kind: 'lease', id }, kind: 'renew', payload: { heartbeatMs: 120_000 }, actor: tester },
            { fromOutside: false },
          ),
        ),
    ),
  );
  const v2Ids = queuedV2.map((r) => r.command.id);
  await waitFor('the old worker to leave every v2 renewal alone', async () => {
    const rows = await renewals(db, v2Ids);
    return rows.every((r) => r.status === 'queued' && r.message === 'waiting for a worker that handles lease renew v2');
  });
  const heartbeats = async () => (await db.selectFrom('leases').select('heartbeat_ms').where('id', 'in', ids).execute()).map((l) => l.heartbeat_ms);
  expect(await heartbeats()).toEqual(ids.map(() => 60_000));

  // A new worker joins: it runs them.
  await cluster.workers.start(1);
  expect((await settled(db, v2Ids)).map((r) => r.status)).toEqual(ids.map(() => 'done'));
  expect(await heartbeats()).toEqual(ids.map(() => 120_000));

  // Side by side: rounds of both versions for every lease; the new worker reads v1 upgraded.
  const mixed: number[] = [];
  for (let round = 1; round <= 3; round++) {
    for (const id of ids) {
      mixed.push((await renew(id, { expiresInMs: 600_000 + round })).command.id);
      mixed.push((await renew(id, { heartbeatMs: 120_000 + round * 1000 })).command.id);
    }
  }
  const rows = await settled(db, mixed);
  expect(rows.map((r) => r.status)).toEqual(mixed.map(() => 'done'));
  expect(new Set(rows.map((r) => r.version))).toEqual(new Set([1, 2]));

  // Each renewal was applied exactly once: one `renewed` event per command.
  const all = [...v1.map((r) => r.command.id), ...v2Ids, ...mixed];
  const events = await db
    .selectFrom('events')
    .innerJoin('commands', 'commands.id', 'events.command_id')
    .select(['events.id', 'events.target_id', 'commands.id as command', 'commands.payload'])
    .where('events.type', '=', 'renewed')
    .where('events.command_id', 'in', all)
    .orderBy('events.id')
    .execute();
  expect(events.map((e) => e.command).sort((a, b) => a - b)).toEqual([...all].sort((a, b) => a - b));
  // And each had its effect: a lease holds the interval and term of the last
  // renewal applied to it that set one. (In the order applied: a command an
  // old worker handed on may be overtaken by later ones, see known limits.)
  for (const id of ids) {
    const applied = events
      .filter((e) => e.target_id === id)
      .map((e) => e.payload as { expiresInMs?: number; heartbeatMs?: number })
      .reverse();
    const lease = await db.selectFrom('leases').select(['heartbeat_ms', 'term_ms']).where('id', '=', id).executeTakeFirstOrThrow();
    expect(lease).toEqual({
      heartbeat_ms: applied.find((p) => p.heartbeatMs !== undefined)!.heartbeatMs,
      term_ms: applied.find((p) => p.expiresInMs !== undefined)!.expiresInMs,
    });
  }
  expect(cluster.workers.errors()).toEqual([]);
});

/** Throws `error` with the commands not yet done, their objects' lock holders and wake-ups, and the workers' output. */
async function stall(db: Db, error: Error, output: string): Promise<never> {
  const unfinished = await db
    .selectFrom('commands as c')
    .leftJoin('drain_wakeups as w', (join) => join.onRef('w.target_kind', '=', 'c.target_kind').onRef('w.target_id', '=', 'c.target_id'))
    .select(['c.id', 'c.target_kind', 'c.target_id', 'c.kind', 'c.status', 'c.attempts', 'c.message', 'c.not_before', 'w.run_at as wakeup'])
    .where('c.status', 'in', ['queued', 'running'])
    .orderBy('c.id')
    .execute();
  const rows = await Promise.all(unfinished.map(async (c) => ({ ...c, lock_holder: await lockHolder(db, c.target_kind, c.target_id) })));
  throw new Error(`${error.message}\nunfinished commands (now ${new Date().toISOString()}):\n${JSON.stringify(rows, null, 1)}\n${output}`);
}

/** The release before this one (found in the history): its worker must do no harm on this release's schema. */
const PREVIOUS = previousRelease();
if (!PREVIOUS) console.warn("rollingUpgrade: no earlier release is in this clone (a shallow one?): the previous release's worker is not run");

const previousTree = path.resolve('.slipway', `previous-release-${randomBytes(4).toString('hex')}`);
afterAll(() => rm(previousTree, { recursive: true, force: true }));

test.skipIf(!PREVIOUS)(
  "the previous release's worker, on this release's schema, serves whole lifecycles alone and beside this release's worker",
  async () => {
    // Its tree as it was released, with this checkout's node_modules (its dependencies are a subset).
    await mkdir(previousTree, { recursive: true });
    execFileSync('sh', ['-c', `git archive ${PREVIOUS!.commit} | tar -x -C ${JSON.stringify(previousTree)}`]);
    await symlink(path.resolve('node_modules'), path.join(previousTree, 'node_modules'));
    const db = cluster.database.db;
    const previous = new WorkerProcesses(cluster.database.url, { LOG_LEVEL: 'info' }, path.join(previousTree, 'test/helpers/workerProcess.ts'));
    // A stall names what is stuck, who holds it, and what the workers said.
    const explained = (error: Error) => stall(db, error, `${previous.lastOutput()}\n${cluster.workers.lastOutput()}`);
    /** Two leases on a blueprint made by this release, from pending to destroyed. */
    async function lifecycles(name: string): Promise<void> {
      const blueprint = await simulatedBlueprint(db, name, { maxResources: 1, leasesPerResource: 2 });
      const leases = await Promise.all([1, 2].map((i) => createLease(db, { blueprint: blueprint.name, holder: `${name}-${i}` }, tester)));
      const ids = leases.map((l) => l.lease.id);
      await waitForLeases(db, ids, ['active']).catch(explained);
      await Promise.all(ids.map((id) => releaseLease(db, id)));
      await waitForLeases(db, ids, ['destroyed']).catch(explained);
      const trails = await stateTrails(db, 'lease');
      for (const id of ids) expect(trails.get(id)).toEqual({ states: ['pending', 'acquired', 'active', 'released', 'destroyed'], breaks: [] });
    }
    try {
      // The previous release drains with the same engine; since 0016 its
      // queue_callback_delivery only marks a delivery due, and this release's
      // workers queue the jobs (docs/upgrades.md).
      await Promise.all(cluster.workers.running().map((w) => cluster.workers.kill(w, 'SIGTERM')));
      await previous.start(1);
      // Alone, as when it takes every object of a lifecycle mid-roll: this
      // release's blueprints carry nothing it refuses (their driver settings
      // are stored as given, without this release's new defaults).
      await lifecycles('previous-alone');
      // Beside this release's worker: it registers, drains and sweeps without an error.
      await cluster.workers.start(1, { LOG_LEVEL: 'info' });
      await lifecycles('side-by-side');
      // It registered through its own insert, with its version (null before 0014's column existed; set since).
      expect((await db.selectFrom('workers').select('version').execute()).length).toBe(2);
      expect(previous.errors()).toEqual([]);
    } finally {
      await previous.stopAll();
    }
  },
);
