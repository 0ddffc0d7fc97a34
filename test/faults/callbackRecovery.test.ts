import { sql } from 'kysely';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { CallbackReceiver } from '../callbacks/support/CallbackReceiver.ts';
import { releaseWithCallback, waitForCallback } from '../callbacks/support/callbackFixtures.ts';
import { createLeases, simulatedBlueprint, waitForLeases } from '../concurrency/support/fixtures.ts';
import { clusterForThisFile } from '../concurrency/support/testCluster.ts';
import { waitFor } from '../helpers/waitFor.ts';

/**
 * A worker SIGKILLed in the middle of a callback delivery leaves its
 * graphile-worker job locked under its pool's id. The other worker's sweeper
 * sees that no live worker answers for that pool (the dead one's liveness
 * lock went with its process) and frees the job, which is then delivered
 * again within seconds, not after graphile-worker's 4-hour lock timeout.
 */
const cluster = clusterForThisFile({ workers: 2, poolSize: 5, env: { SLIPWAY_HEARTBEAT_MS: '500' } });

let receiver: CallbackReceiver;
beforeAll(async () => {
  receiver = await CallbackReceiver.start();
});
afterAll(async () => receiver?.close());

test('a delivery whose worker is SIGKILLed mid-request is made again by another worker', async () => {
  const db = cluster.database.db;
  const blueprint = await simulatedBlueprint(db, 'callback-recovery', { maxResources: 1, leasesPerResource: 1 });
  const [lease] = await createLeases(db, blueprint, 1);
  await waitForLeases(db, [lease!.id], ['active']);

  // The first delivery never gets an answer: its worker is still in it when killed.
  receiver.script('/hang', [{ hang: true }]);
  const { command } = await releaseWithCallback(db, lease!.id, receiver.url('/hang'));
  await waitFor('the first delivery to reach the receiver', async () => receiver.received('/hang').length === 1);

  const { rows } = await sql<{ pid: number; locker: string }>`
    select w.pid, j.locked_by as locker
    from graphile_worker.jobs j join workers w on j.locked_by = any(w.job_lockers)
    where j.task_identifier = 'deliver_callback' and j.locked_by is not null
  `.execute(db);
  expect(rows, 'the delivering worker lists the pool that holds the job').toHaveLength(1);
  const victim = cluster.workers.running().find((w) => w.child.pid === rows[0]!.pid);
  expect(victim, 'the delivering worker is one of ours').toBeDefined();
  expect(await cluster.workers.kill(victim!, 'SIGKILL')).toBe(true);

  // The bound only says "by the sweeper": staleness bound + a sweep + the delivery, with ample slack.
  await waitFor('the other worker to deliver again', async () => receiver.received('/hang').length === 2, 30_000);
  const callback = await waitForCallback(db, command.id, ['delivered']);
  expect(callback.status).toBe('delivered');
  const { rows: left } = await sql<{ n: number }>`
    select count(*)::int as n from graphile_worker.jobs where locked_by = ${rows[0]!.locker}
  `.execute(db);
  expect(left[0]!.n, 'nothing is left locked by the dead pool').toBe(0);
  expect(cluster.workers.errors()).toEqual([]);
});
