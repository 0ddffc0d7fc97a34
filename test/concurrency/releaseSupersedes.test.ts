import { expect, test } from 'vitest';
import { waitFor } from '../helpers/waitFor.ts';
import { stateTrails } from './support/eventLog.ts';
import { createLeases, releaseLease, simulatedBlueprint, waitForLeases, waitForQuietQueues } from './support/fixtures.ts';
import { clusterForThisFile } from './support/testCluster.ts';

/**
 * A release goes ahead of older work and is never stuck behind work it makes
 * pointless: an activation that keeps yielding (its driver call always fails,
 * transiently) is cancelled by the release. Going first is about order only:
 * a release that itself keeps failing waits out its backoff like anything
 * else, instead of hammering the driver.
 */
const cluster = clusterForThisFile({ workers: 2, poolSize: 5, env: { SLIPWAY_CHAOS_DRAIN_DELAY_MS: '10' } });

test('a release supersedes an activation that keeps yielding', async () => {
  const db = cluster.database.db;
  const blueprint = await simulatedBlueprint(
    db,
    'never-activates',
    { maxResources: 1, leasesPerResource: 1 },
    { transientFailureRate: 1, failOperations: ['activateLease'] },
  );
  const [lease] = await createLeases(db, blueprint, 1);
  const activation = () =>
    db
      .selectFrom('commands')
      .selectAll()
      .where('target_kind', '=', 'lease')
      .where('target_id', '=', lease!.id)
      .where('kind', '=', 'activate')
      .executeTakeFirst();
  await waitFor('the activation to have yielded twice', async () => ((await activation())?.attempts ?? 0) >= 2);

  const { command: release } = await releaseLease(db, lease!.id);
  await waitForLeases(db, [lease!.id], ['destroyed'], 30_000);
  await waitForQuietQueues(db);

  expect(await activation()).toMatchObject({ status: 'cancelled', message: `superseded by release (command ${release.id})` });
  expect((await stateTrails(db, 'lease')).get(lease!.id)).toEqual({ states: ['pending', 'acquired', 'released', 'destroyed'], breaks: [] });
  const effects = await db
    .selectFrom('simulated_effects')
    .select(['operation', 'calls'])
    .where('object_id', '=', lease!.id)
    .where('operation', 'like', '%Lease')
    .orderBy('operation')
    .execute();
  expect(effects).toEqual([
    { operation: 'acquireLease', calls: 1 },
    { operation: 'releaseLease', calls: 1 },
  ]);
  expect(cluster.workers.errors()).toEqual([]);
});

test('a release whose driver call keeps failing goes first, but still backs off between attempts', async () => {
  const db = cluster.database.db;
  const blueprint = await simulatedBlueprint(
    db,
    'never-releases',
    { maxResources: 1, leasesPerResource: 1 },
    { transientFailureRate: 1, failOperations: ['releaseLease'], transientRetryAfterMs: 50 },
  );
  const [lease] = await createLeases(db, blueprint, 1);
  await waitForLeases(db, [lease!.id], ['active']);
  await releaseLease(db, lease!.id);
  const attempts = await waitFor('five failed attempts', async () => {
    const errors = await db
      .selectFrom('events')
      .select(['created_at', 'data'])
      .where('target_kind', '=', 'lease')
      .where('target_id', '=', lease!.id)
      .where('type', '=', 'driver_error')
      .orderBy('id')
      .execute();
    return errors.length >= 5 && errors;
  });
  for (const [previous, next] of attempts.slice(1).map((e, i) => [attempts[i]!, e] as const)) {
    const { retryInMs } = previous.data as { retryInMs: number };
    expect(next.created_at.getTime() - previous.created_at.getTime()).toBeGreaterThanOrEqual(retryInMs);
  }
  expect(cluster.workers.errors()).toEqual([]);
});
