import { expect, test } from 'vitest';
import { stateTrails } from '../concurrency/support/eventLog.ts';
import { createLeases, releaseLease, simulatedBlueprint, waitForLeases } from '../concurrency/support/fixtures.ts';
import { lockHolder } from '../concurrency/support/lockHolder.ts';
import { clusterForThisFile } from '../concurrency/support/testCluster.ts';
import { waitFor } from '../helpers/waitFor.ts';

/**
 * A worker told to stop (SIGTERM) while a release is inside its driver call:
 * within the grace period it finishes the call, commits the outcome and
 * exits 0, and nobody calls the driver again; past it, it exits 1 at once
 * and another worker repeats the call (at least once) and changes the
 * lease's state once, as after a crash. Each test starts its own two
 * workers, with its grace period, and stops them after.
 */
const cluster = clusterForThisFile({ workers: 0, poolSize: 5 });

async function releaseDuringDriverCall(name: string, releaseLatencyMs: number, graceMs: number) {
  const db = cluster.database.db;
  const workers = await cluster.workers.start(2, { SLIPWAY_SHUTDOWN_GRACE_MS: String(graceMs) });
  const blueprint = await simulatedBlueprint(
    db,
    name,
    { maxResources: 1, leasesPerResource: 1 },
    { operationLatencyMs: { releaseLease: releaseLatencyMs } },
  );
  const [lease] = await createLeases(db, blueprint, 1);
  await waitForLeases(db, [lease!.id], ['active']);
  const { command: release } = await releaseLease(db, lease!.id);
  const status = async () => (await db.selectFrom('commands').select('status').where('id', '=', release.id).executeTakeFirstOrThrow()).status;
  await waitFor('the release to be running', async () => (await status()) === 'running');
  const holder = await lockHolder(db, 'lease', lease!.id);
  expect(holder, 'a worker holds the lease while its release runs').toBeDefined();
  const victim = cluster.workers.byName(holder!);
  const other = workers.find((w) => w !== victim)!;
  const effects = () =>
    db
      .selectFrom('simulated_effects')
      .select(['idempotency_key', 'calls'])
      .where('operation', '=', 'releaseLease')
      .where('object_id', '=', lease!.id)
      .execute();
  return { db, lease: lease!, release, status, victim, other, effects };
}

async function stopBoth(...workers: Parameters<typeof cluster.workers.kill>[0][]) {
  for (const worker of workers) await cluster.workers.kill(worker, 'SIGTERM');
}

test('within the grace period: the release in flight finishes on the stopping worker, which exits 0', async () => {
  // A call long enough that the signal lands in it on a loaded machine too.
  const run = await releaseDuringDriverCall('graceful', 6000, 60_000);
  expect(await run.status()).toBe('running');
  // The bound is the grace period (a minute): the stop waits for the call, not for it.
  expect(await cluster.workers.kill(run.victim, 'SIGTERM', 60_000)).toBe(true);
  expect(run.victim.child.exitCode).toBe(0);
  expect(await run.status()).toBe('done');
  // The stopping worker made the call and committed it: nobody made it again.
  expect(await run.effects()).toEqual([{ idempotency_key: `lease:${run.lease.id}:${run.release.id}`, calls: 1 }]);
  // The release destroyed the lease in the same commit; the other worker drains the slot's return.
  await waitForLeases(run.db, [run.lease.id], ['destroyed']);
  expect((await stateTrails(run.db, 'lease')).get(run.lease.id)).toEqual({
    states: ['pending', 'acquired', 'active', 'released', 'destroyed'],
    breaks: [],
  });
  await stopBoth(run.other);
});

test('past the grace period: the stopping worker exits 1 at once, and another worker repeats the call and changes state once', async () => {
  const run = await releaseDuringDriverCall('impatient', 8000, 1000);
  // Well before the 8 s call could end: the grace period (1 s) cut it short.
  expect(await cluster.workers.kill(run.victim, 'SIGTERM', 6000)).toBe(true);
  expect(run.victim.child.exitCode).toBe(1);
  expect(run.victim.output.join('')).toContain('shutdown grace period over');
  await waitFor('the other worker to finish the release', async () => (await run.status()) === 'done', 60_000);
  await waitForLeases(run.db, [run.lease.id], ['destroyed']);
  expect((await stateTrails(run.db, 'lease')).get(run.lease.id)).toEqual({
    states: ['pending', 'acquired', 'active', 'released', 'destroyed'],
    breaks: [],
  });
  // At least once for the call (same idempotency key), exactly once for the state change.
  const effects = await run.effects();
  expect(effects.map((e) => e.idempotency_key)).toEqual([`lease:${run.lease.id}:${run.release.id}`]);
  expect(effects[0]!.calls).toBeGreaterThanOrEqual(1);
  await stopBoth(run.other);
});
