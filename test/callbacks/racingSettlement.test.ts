import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { attachCallback } from '../../src/callbacks/attachCallback.ts';
import { verifyCallbackSignature } from '../../src/callbacks/signCallback.ts';
import { appendInTransaction } from '../../src/queue/appendCommand.ts';
import { readCallbacks } from '../../src/read/callbacks.ts';
import { readCommandTree } from '../../src/read/commandTree.ts';
import {
  createLeases,
  releaseLease,
  shuffle,
  simulatedBlueprint,
  tester,
  waitForLeases,
  waitForQuietQueues,
} from '../concurrency/support/fixtures.ts';
import { clusterForThisFile } from '../concurrency/support/testCluster.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { LOOPBACK, TEST_SECRET } from './support/callbackFixtures.ts';
import { CallbackReceiver } from './support/CallbackReceiver.ts';

/**
 * Trying to break "delivered once, after the whole tree settled": worker
 * processes with random pauses settle the commands of one tree on different
 * objects at once (a resource release releases every lease on it), and
 * clients attach callbacks to commands at random moments while they run,
 * several clients the same URL.
 */
const cluster = clusterForThisFile({
  workers: 2,
  poolSize: 20,
  env: { SLIPWAY_CHAOS_DRAIN_DELAY_MS: '30', SLIPWAY_CALLBACK_SECRET: TEST_SECRET },
});
let receiver: CallbackReceiver;
beforeAll(async () => {
  receiver = await CallbackReceiver.start();
});
afterAll(async () => receiver?.close());

test('callbacks racing with their trees settling are each delivered exactly once, with the final tree', async () => {
  const db = cluster.database.db;
  const shared = await simulatedBlueprint(db, 'shared', { maxResources: 2, leasesPerResource: 3 }, { latencyMs: { min: 0, max: 20 } });
  const single = await simulatedBlueprint(db, 'single', { maxResources: 8, leasesPerResource: 1 }, { latencyMs: { min: 0, max: 20 } });
  const sharedLeases = await createLeases(db, shared, 6);
  const singleLeases = await createLeases(db, single, 8);
  await waitForLeases(
    db,
    [...sharedLeases, ...singleLeases].map((l) => l.id),
    ['active'],
  );
  const resources = await db.selectFrom('resources').select('id').where('blueprint_id', '=', shared.id).execute();
  expect(resources).toHaveLength(2);

  // Resource releases with their callback in the same transaction: each tree
  // spans the resource and its three leases, settled by different drains.
  const resourceReleases = await Promise.all(
    resources.map(({ id }) =>
      db.transaction().execute(async (trx) => {
        const { command } = await appendInTransaction(
          trx,
          { target: { kind: 'resource', id }, kind: 'release', actor: tester },
          { fromOutside: true },
        );
        await attachCallback(trx, command.id, receiver.url(`/resource/${id}`), LOOPBACK);
        return command.id;
      }),
    ),
  );
  // Lease releases with callbacks attached afterwards, at random moments, by
  // two clients per URL, two URLs per release, each in a transaction that
  // goes on a little after attaching (as an API request's might), so that
  // drains settle commands of the tree while it is open.
  const leaseReleases = await Promise.all(singleLeases.map(async (lease) => (await releaseLease(db, lease.id)).command.id));
  const attaches = shuffle(
    leaseReleases.flatMap((id) => [`/lease/${id}/a`, `/lease/${id}/a`, `/lease/${id}/b`, `/lease/${id}/b`].map((path) => ({ id, path }))),
  );
  await Promise.all(
    attaches.map(async ({ id, path }) => {
      await sleep(Math.random() * 1200);
      await db.transaction().execute(async (trx) => {
        await attachCallback(trx, id, receiver.url(path), LOOPBACK);
        await sleep(Math.random() * 150);
      });
    }),
  );

  const roots = [...resourceReleases, ...leaseReleases];
  const expected = resourceReleases.length + leaseReleases.length * 2;
  await waitForQuietQueues(db, 120_000);
  await waitFor(
    `${expected} callbacks delivered`,
    async () => (await Promise.all(roots.map((id) => readCallbacks(db, id)))).flat().filter((c) => c.status === 'delivered').length === expected,
    60_000,
  );

  const requests = receiver.received();
  expect(requests).toHaveLength(expected);
  expect(new Set(requests.map((r) => r.headers['slipway-delivery'])).size).toBe(expected);
  for (const request of requests) {
    expect(verifyCallbackSignature({ header: request.headers['slipway-signature'] as string, body: request.body, secret: TEST_SECRET }).ok).toBe(
      true,
    );
    const body = JSON.parse(request.body);
    const finalTree = await readCommandTree(db, body.command.id);
    expect(body.tree.map((n: { id: number; status: string }) => [n.id, n.status])).toEqual(finalTree.map((n) => [n.id, n.status]));
  }
  // A resource release's tree holds its leases' releases, the count that the
  // return of its last slot asked for (one or more: two returns at once may
  // both ask), and its destroy.
  const resourceBody = JSON.parse(receiver.received(`/resource/${resources[0]!.id}`)[0]!.body);
  const kinds = (kind: string, targetKind: string) =>
    resourceBody.tree.filter((n: { kind: string; targetKind: string }) => n.kind === kind && n.targetKind === targetKind).length;
  expect(kinds('release', 'lease')).toBe(3);
  expect(kinds('count_slots', 'resource')).toBeGreaterThanOrEqual(1);
  expect(kinds('destroy', 'resource')).toBe(1);
  expect(cluster.workers.errors()).toEqual([]);
});
