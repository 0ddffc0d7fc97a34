import { expect, test } from 'vitest';
import type { BlueprintRow } from '../../migrations/schema.ts';
import type { Db } from '../../src/db/Database.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { CapacitySampler } from './support/CapacitySampler.ts';
import { peakLiveResources, peakSlotsUsed, stateTrails, trailsOtherThan } from './support/eventLog.ts';
import { createLeases, releaseLease, simulatedBlueprint, waitForLeases, waitForQuietQueues } from './support/fixtures.ts';
import { clusterForThisFile } from './support/testCluster.ts';

/**
 * Limits hold under concurrency because each is decided by one writer (the
 * blueprint for its resource count, each resource for its slots), and
 * leases that find no capacity wait at the blueprint and are served in turn:
 * none is stuck, whatever happens to the others while they wait.
 */
const SERVED = ['pending', 'acquired', 'active', 'released', 'destroyed'];
const GAVE_UP_WAITING = ['pending', 'released', 'destroyed'];

const cluster = clusterForThisFile({ workers: 2, poolSize: 8, env: { SLIPWAY_CHAOS_DRAIN_DELAY_MS: '10' } });

/** Waits until the blueprint has recorded that each lease is waiting for capacity. */
async function waitUntilWaiting(db: Db, blueprint: BlueprintRow, leaseIds: number[]): Promise<void> {
  await waitFor(`lease(s) ${leaseIds.join(', ')} to wait at blueprint ${blueprint.name}`, async () => {
    const rows = await db
      .selectFrom('blueprint_waiters')
      .select('lease_id')
      .where('blueprint_id', '=', blueprint.id)
      .where('lease_id', 'in', leaseIds)
      .execute();
    return rows.length === leaseIds.length;
  });
}

/** The id of the event that moved an object into `state`. */
async function transitionEventId(db: Db, kind: 'lease' | 'resource', id: number, state: string): Promise<number> {
  const row = await db
    .selectFrom('events')
    .select('id')
    .where('target_kind', '=', kind)
    .where('target_id', '=', id)
    .where('type', '=', 'state')
    .where('to_state', '=', state)
    .executeTakeFirstOrThrow();
  return row.id;
}

test('12 leases on 2 one-slot resources are served in turn without ever exceeding the limit', async () => {
  const db = cluster.database.db;
  const blueprint = await simulatedBlueprint(db, 'scarce', { maxResources: 2, leasesPerResource: 1 }, { latencyMs: { min: 0, max: 20 } });
  const sampler = new CapacitySampler(db, blueprint.id);
  const leaseIds = (await createLeases(db, blueprint, 12)).map((l) => l.id);

  // Release each lease once it is active, as a holder done with it would.
  const released = new Set<number>();
  try {
    await waitFor(
      'every lease to be served and destroyed',
      async () => {
        const leases = await db.selectFrom('leases').select(['id', 'state']).where('id', 'in', leaseIds).execute();
        for (const lease of leases.filter((l) => l.state === 'active' && !released.has(l.id))) {
          released.add(lease.id);
          await releaseLease(db, lease.id);
        }
        return leases.every((l) => l.state === 'destroyed');
      },
      120_000,
    );
  } finally {
    await sampler.stop();
  }
  const samples = sampler.seen;
  await waitForQuietQueues(db);

  expect(released.size).toBe(leaseIds.length);
  expect(samples.count).toBeGreaterThan(10);
  expect(samples.peakLive).toBeLessThanOrEqual(2);
  expect(samples.overbooked).toEqual([]);
  // Post hoc, from the event log: the limit was reached, never exceeded.
  expect(await peakLiveResources(db, blueprint.id)).toBe(2);
  for (const { resourceId, peak, capacity } of await peakSlotsUsed(db, blueprint.id)) {
    expect(peak, `resource ${resourceId}`).toBeLessThanOrEqual(capacity);
  }
  expect(trailsOtherThan(await stateTrails(db, 'lease'), SERVED)).toEqual([]);
  expect(cluster.workers.errors()).toEqual([]);
}, 180_000);

test('pending leases released while they wait at a blueprint at its limit leave, the next waiter is served, and their rows in the line go as it is read', async () => {
  const db = cluster.database.db;
  const blueprint = await simulatedBlueprint(db, 'single', { maxResources: 1, leasesPerResource: 1 });
  const [holder] = await createLeases(db, blueprint, 1);
  await waitForLeases(db, [holder!.id], ['active']);
  // One after another, so their places are in this order: a lease that
  // gives up ahead of the next waiter, and one behind it.
  const [ahead] = await createLeases(db, blueprint, 1);
  const [next] = await createLeases(db, blueprint, 1);
  const [behind] = await createLeases(db, blueprint, 1);
  await waitUntilWaiting(db, blueprint, [ahead!.id, next!.id, behind!.id]);

  for (const quitter of [ahead!, behind!]) await releaseLease(db, quitter.id);
  await waitForLeases(db, [ahead!.id, behind!.id], ['destroyed']);
  await releaseLease(db, holder!.id);
  await waitForLeases(db, [next!.id], ['active']);
  await releaseLease(db, next!.id);
  await waitForLeases(db, [holder!.id, next!.id], ['destroyed']);
  await waitForQuietQueues(db);

  const trails = await stateTrails(db, 'lease');
  for (const quitter of [ahead!, behind!]) expect(trails.get(quitter.id)!.states).toEqual(GAVE_UP_WAITING);
  expect(trails.get(holder!.id)!.states).toEqual(SERVED);
  expect(trails.get(next!.id)!.states).toEqual(SERVED);
  // A row of a lease that left is removed when the blueprint reads its line
  // that far (waitingLine.ts): the one ahead, read past to serve `next`, is
  // gone; the one behind was not read, and stays until the next serving.
  const rows = () => db.selectFrom('blueprint_waiters').select('lease_id').where('blueprint_id', '=', blueprint.id).execute();
  expect(await rows()).toEqual([{ lease_id: behind!.id }]);
  const [later] = await createLeases(db, blueprint, 1);
  await waitForLeases(db, [later!.id], ['active']);
  expect(await rows()).toEqual([]);
  await releaseLease(db, later!.id);
  await waitForLeases(db, [later!.id], ['destroyed']);
  await waitForQuietQueues(db);
  expect(cluster.workers.errors()).toEqual([]);
});

test('a resource made for a lease released before it is ready goes to the next waiter', async () => {
  const db = cluster.database.db;
  const blueprint = await simulatedBlueprint(
    db,
    'slow-to-make',
    { maxResources: 1, leasesPerResource: 1 },
    // Long enough for the second lease to line up and the first to be released meanwhile, on a loaded machine too.
    { operationLatencyMs: { allocateResource: 15_000 } },
  );
  const [first] = await createLeases(db, blueprint, 1);
  const made = await waitFor('a resource to be made for the first lease', () =>
    db.selectFrom('resources').select(['id', 'state']).where('allocated_for_lease_id', '=', first!.id).executeTakeFirst(),
  );
  const [second] = await createLeases(db, blueprint, 1);
  await waitUntilWaiting(db, blueprint, [second!.id]);

  await releaseLease(db, first!.id);
  await waitForLeases(db, [second!.id], ['active'], 60_000);
  await releaseLease(db, second!.id);
  await waitForLeases(db, [first!.id, second!.id], ['destroyed']);
  await waitForQuietQueues(db);

  // The scenario really happened: the first lease gave up before its resource was ready.
  expect(await transitionEventId(db, 'lease', first!.id, 'released')).toBeLessThan(await transitionEventId(db, 'resource', made.id, 'active'));
  const trails = await stateTrails(db, 'lease');
  expect(trails.get(first!.id)!.states).toEqual(GAVE_UP_WAITING);
  expect(trails.get(second!.id)!.states).toEqual(SERVED);
  expect(cluster.workers.errors()).toEqual([]);
});
