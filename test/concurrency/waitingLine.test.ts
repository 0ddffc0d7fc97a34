import { sql } from 'kysely';
import { expect, test } from 'vitest';
import type { BlueprintRow } from '../../migrations/schema.ts';
import type { Db } from '../../src/db/Database.ts';
import type { BlueprintState } from '../../src/domain/lifecycle.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { type BlueprintChanges, setBlueprintState, updateBlueprint } from '../../src/objects/updateBlueprint.ts';
import { appendCommand } from '../../src/queue/appendCommand.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { createLeases, simulatedBlueprint, tester, waitForLeases, waitForQuietQueues } from './support/fixtures.ts';
import { clusterForThisFile } from './support/testCluster.ts';

/**
 * No waiting lease is ever stranded: whatever makes room at a blueprint (a
 * raised limit, an enable, a destroyed resource) serves the leases waiting
 * there, through real worker processes. Each test is one way the line was
 * once left waiting for ever (with room) until an unrelated blueprint change.
 */
const cluster = clusterForThisFile({ workers: 2, poolSize: 8, env: { SLIPWAY_CHAOS_DRAIN_DELAY_MS: '10' } });

const change = (db: Db, blueprint: BlueprintRow, changes: BlueprintChanges) =>
  db.transaction().execute((trx) => updateBlueprint(trx, blueprint.id, changes, tester));
const setState = (db: Db, blueprint: BlueprintRow, to: BlueprintState) =>
  db.transaction().execute((trx) => setBlueprintState(trx, blueprint.id, to, tester));

/** Waits until each lease is in the blueprint's waiting line, and returns the message of the need_resource that put it there. */
async function waitUntilWaiting(db: Db, leaseIds: number[]): Promise<string[]> {
  await waitFor(`lease(s) ${leaseIds.join(', ')} to wait`, async () => {
    const rows = await db.selectFrom('blueprint_waiters').select('lease_id').where('lease_id', 'in', leaseIds).execute();
    return rows.length === leaseIds.length;
  });
  const rows = await db
    .selectFrom('events')
    .select('message')
    .where('target_kind', '=', 'blueprint')
    .where('type', '=', 'lease_waiting')
    .where(sql<string>`data->>'leaseId'`, 'in', leaseIds.map(String))
    .orderBy('id')
    .execute();
  return rows.map((r) => r.message);
}

test('a raised resource limit serves the leases waiting at the old one, and the next lease too', async () => {
  const db = cluster.database.db;
  const blueprint = await simulatedBlueprint(db, 'grow', { maxResources: 1, leasesPerResource: 1 });
  const [holder] = await createLeases(db, blueprint, 1);
  await waitForLeases(db, [holder!.id], ['active']);
  const waiters = (await createLeases(db, blueprint, 3)).map((l) => l.id);
  const why = await waitUntilWaiting(db, waiters);
  expect(why).toHaveLength(3);
  for (const message of why) expect(message).toMatch(/^lease \d+ waits: at its limit; 1 of 1 live, no free slot; [0-2] waiting ahead$/);

  await change(db, blueprint, { maxResources: 5 });
  await waitForLeases(db, waiters, ['active']);
  const [fourth] = await createLeases(db, blueprint, 1);
  await waitForLeases(db, [fourth!.id], ['active']);
  await waitForQuietQueues(db);

  const row = await db.selectFrom('blueprints').select('live_resources').where('id', '=', blueprint.id).executeTakeFirstOrThrow();
  expect(row.live_resources).toBe(5);
  expect(cluster.workers.errors()).toEqual([]);
});

test('a lease that asked while its blueprint was disabled is served once it is enabled, and so are later ones', async () => {
  const db = cluster.database.db;
  const blueprint = await simulatedBlueprint(db, 'reenabled', { maxResources: 2, leasesPerResource: 1 });
  // Created while enabled, then the blueprint disabled in the same
  // transaction: the lease's request for capacity reaches a disabled blueprint.
  const early = await db.transaction().execute(async (trx) => {
    const { lease } = await createLease(trx, { blueprint: blueprint.name, holder: 'early' }, tester);
    await setBlueprintState(trx, blueprint.id, 'disabled', tester);
    return lease;
  });
  const [why] = await waitUntilWaiting(db, [early.id]);
  expect(why).toBe(`lease ${early.id} waits: blueprint disabled: it makes no resources; 0 of 2 live, no free slot; 0 waiting ahead`);

  await setState(db, blueprint, 'enabled');
  await waitForLeases(db, [early.id], ['active']);
  const [later] = await createLeases(db, blueprint, 1);
  await waitForLeases(db, [later!.id], ['active']);
  await waitForQuietQueues(db);
  expect(cluster.workers.errors()).toEqual([]);
});

test('a full pool emptied for maintenance while disabled serves its waiting lease, and new ones, once enabled', async () => {
  const db = cluster.database.db;
  const blueprint = await simulatedBlueprint(db, 'maintained', { maxResources: 2, leasesPerResource: 1 });
  const holders = (await createLeases(db, blueprint, 2)).map((l) => l.id);
  await waitForLeases(db, holders, ['active']);
  const [waiter] = await createLeases(db, blueprint, 1);
  await waitUntilWaiting(db, [waiter!.id]);

  await setState(db, blueprint, 'disabled');
  const resources = await db.selectFrom('resources').select('id').where('blueprint_id', '=', blueprint.id).execute();
  expect(resources).toHaveLength(2);
  for (const { id } of resources) await appendCommand(db, { target: { kind: 'resource', id }, kind: 'release', actor: tester });
  await waitForLeases(db, holders, ['destroyed']);
  await waitForQuietQueues(db);
  // The pool is empty and disabled: the waiter still waits, and says why.
  const emptied = await db.selectFrom('blueprints').select('live_resources').where('id', '=', blueprint.id).executeTakeFirstOrThrow();
  expect(emptied.live_resources).toBe(0);
  expect((await db.selectFrom('leases').select('state').where('id', '=', waiter!.id).executeTakeFirstOrThrow()).state).toBe('pending');
  const lastDestroyed = await db
    .selectFrom('commands')
    .select('message')
    .where('target_kind', '=', 'blueprint')
    .where('target_id', '=', blueprint.id)
    .where('kind', '=', 'resource_destroyed')
    // The last one decided: the two resources' destroys may commit their notes to the blueprint out of id order.
    .orderBy('finished_at', 'desc')
    .orderBy('id', 'desc')
    .executeTakeFirstOrThrow();
  expect(lastDestroyed.message).toMatch(/; 1 lease\(s\) wait \(blueprint disabled: it makes no resources; 0 of 2 live, no free slot\)$/);

  await setState(db, blueprint, 'enabled');
  await waitForLeases(db, [waiter!.id], ['active']);
  const [next] = await createLeases(db, blueprint, 1);
  await waitForLeases(db, [next!.id], ['active']);
  await waitForQuietQueues(db);
  expect(cluster.workers.errors()).toEqual([]);
});
