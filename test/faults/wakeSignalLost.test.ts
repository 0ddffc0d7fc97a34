import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { expect, test } from 'vitest';
import { stateTrails } from '../concurrency/support/eventLog.ts';
import { createLeases, simulatedBlueprint, waitForLeases } from '../concurrency/support/fixtures.ts';
import { clusterForThisFile } from '../concurrency/support/testCluster.ts';
import { waitFor } from '../helpers/waitFor.ts';

/**
 * A command is committed with its wake-up row, and the signal that tells the
 * workers goes after the commit, in a transaction of its own. A process
 * killed between the two leaves a durable wake-up that nobody was told of:
 * the workers' poll finds it. The sweeper is set to look only every ten
 * minutes here, so a drain within the test's wait can only be the poll's.
 */
const cluster = clusterForThisFile({
  workers: 2,
  poolSize: 5,
  env: { SLIPWAY_DRAIN_POLL_MS: '1000', SLIPWAY_SWEEP_INTERVAL_MS: String(10 * 60_000) },
});

test('a process SIGKILLed between a command commit and its wake-up signal: the object is drained by the poll, once', async () => {
  const db = cluster.database.db;
  const blueprint = await simulatedBlueprint(db, 'signal-lost', { maxResources: 1, leasesPerResource: 2 });
  const [lease] = await createLeases(db, blueprint, 1);
  await waitForLeases(db, [lease!.id], ['active']);

  const run = promisify(execFile)(process.execPath, [
    '--import',
    'tsx',
    'test/faults/support/appendThenDie.ts',
    cluster.database.url,
    String(lease!.id),
  ]);
  await expect(run).rejects.toMatchObject({ signal: 'SIGKILL' });
  const release = await db
    .selectFrom('commands')
    .select('id')
    .where('target_id', '=', lease!.id)
    .where('kind', '=', 'release')
    .executeTakeFirstOrThrow();

  await waitForLeases(db, [lease!.id], ['destroyed']);
  const settled = await db.selectFrom('commands').select('status').where('id', '=', release.id).executeTakeFirstOrThrow();
  expect(settled.status).toBe('done');
  expect((await stateTrails(db, 'lease')).get(lease!.id)).toEqual({ states: ['pending', 'acquired', 'active', 'released', 'destroyed'], breaks: [] });
  expect(cluster.workers.errors()).toEqual([]);
  await waitFor('no wake-up left behind', async () => (await db.selectFrom('drain_wakeups').select('target_id').execute()).length === 0);
});
