import { expect, test } from 'vitest';
import { waitFor } from '../helpers/waitFor.ts';
import { stateTrails } from './support/eventLog.ts';
import { createLeases, releaseLease, simulatedBlueprint, waitForLeases } from './support/fixtures.ts';
import { lockHolder } from './support/lockHolder.ts';
import { clusterForThisFile } from './support/testCluster.ts';

/**
 * A worker dies (SIGKILL: no cleanup, no goodbye) while a release is inside
 * its driver call. PostgreSQL drops the dead session's advisory lock, another
 * worker's sweeper wakes the lease, and the release is repeated: the driver
 * may be called again (at least once) but the lease changes state once.
 */
/** Long enough for the kill to land in the call on a loaded machine too. */
const RELEASE_LATENCY_MS = 8000;

const cluster = clusterForThisFile({ workers: 2, poolSize: 5 });

test('a release whose worker is SIGKILLed mid-drain completes on another worker, changing state once', async () => {
  const db = cluster.database.db;
  const blueprint = await simulatedBlueprint(
    db,
    'slow-release',
    { maxResources: 1, leasesPerResource: 1 },
    { operationLatencyMs: { releaseLease: RELEASE_LATENCY_MS } },
  );
  const [lease] = await createLeases(db, blueprint, 1);
  await waitForLeases(db, [lease!.id], ['active']);

  const { command: release } = await releaseLease(db, lease!.id);
  const commandStatus = async () => (await db.selectFrom('commands').select('status').where('id', '=', release.id).executeTakeFirstOrThrow()).status;
  await waitFor('the release to be running', async () => (await commandStatus()) === 'running');
  const holder = await lockHolder(db, 'lease', lease!.id);
  expect(holder, 'a worker holds the lease while its release runs').toBeDefined();
  const victim = cluster.workers.byName(holder!);
  expect(await cluster.workers.kill(victim, 'SIGKILL')).toBe(true);

  // The bound only says "by the sweeper, not graphile-worker's 4-hour lock
  // timeout": sweep interval + staleness + the slow call, with ample slack.
  await waitFor('another worker to finish the release', async () => (await commandStatus()) === 'done', 60_000);
  await waitForLeases(db, [lease!.id], ['destroyed']);

  const trail = (await stateTrails(db, 'lease')).get(lease!.id)!;
  expect(trail).toEqual({ states: ['pending', 'acquired', 'active', 'released', 'destroyed'], breaks: [] });
  const releasedBy = await db
    .selectFrom('events')
    .select('command_id')
    .where('target_kind', '=', 'lease')
    .where('target_id', '=', lease!.id)
    .where('to_state', '=', 'released')
    .execute();
  expect(releasedBy).toEqual([{ command_id: release.id }]);

  // At least once for the call, exactly once for the effect it stands for.
  const effects = await db
    .selectFrom('simulated_effects')
    .select(['idempotency_key', 'calls'])
    .where('operation', '=', 'releaseLease')
    .where('object_id', '=', lease!.id)
    .execute();
  expect(effects.map((e) => e.idempotency_key)).toEqual([`lease:${lease!.id}:${release.id}`]);
  expect(effects[0]!.calls).toBeGreaterThanOrEqual(1);
  expect(cluster.workers.errors()).toEqual([]);
});
