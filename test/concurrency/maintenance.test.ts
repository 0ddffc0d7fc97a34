import { expect, test } from 'vitest';
import type { Db } from '../../src/db/Database.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { peakSlotsUsed, stateTrails, trailBreaks } from './support/eventLog.ts';
import { askFor, createLeases, releaseLease, shuffle, simulatedBlueprint, waitForLeases, waitForQuietQueues } from './support/fixtures.ts';
import { clusterForThisFile } from './support/testCluster.ts';

/**
 * Maintenance: a cordoned resource takes no new lease from the moment its
 * cordon is applied (it is a command on the resource's own queue, and the
 * resource alone grants its slots), while the leases on it carry on and
 * their releases go through; uncordoned, it serves the line again. Two
 * worker processes with random delays in every step, requests racing the
 * cordon.
 */
const cluster = clusterForThisFile({ workers: 2, poolSize: 12, env: { SLIPWAY_CHAOS_DRAIN_DELAY_MS: '10' } });

/** Appends `kind` to the object as an operator would, from outside, with the reason the tests look for. */
const ask = (db: Db, target: { kind: 'resource' | 'blueprint'; id: number }, kind: string) => askFor(db, target, kind, undefined, 'kernel update');

const resourceState = async (db: Db, id: number) =>
  await db.selectFrom('resources').select(['state', 'used_slots']).where('id', '=', id).executeTakeFirstOrThrow();

/** The resource's slot grants, and the id of the event that put it into maintenance (if any), in event order. */
async function grantsAndCordon(db: Db, resourceId: number): Promise<{ grants: number[]; cordonedAt: number | undefined }> {
  const events = await db
    .selectFrom('events')
    .select(['id', 'type', 'to_state'])
    .where('target_kind', '=', 'resource')
    .where('target_id', '=', resourceId)
    .orderBy('id')
    .execute();
  return {
    grants: events.filter((e) => e.type === 'slot_granted').map((e) => e.id),
    cordonedAt: events.find((e) => e.type === 'state' && e.to_state === 'maintenance')?.id,
  };
}

test('a cordoned resource grants no slot after its cordon, while its leases carry on and are released; uncordoned, it serves the line', async () => {
  const db = cluster.database.db;
  const blueprint = await simulatedBlueprint(db, 'maint', { maxResources: 1, leasesPerResource: 4 }, { latencyMs: { min: 0, max: 15 } });
  const [first, second] = await createLeases(db, blueprint, 2);
  await waitForLeases(db, [first!.id, second!.id], ['active']);
  const { resource_id: resourceId } = await db.selectFrom('leases').select('resource_id').where('id', '=', first!.id).executeTakeFirstOrThrow();

  // Requests race the cordon: some may still be granted before it applies, none after.
  const racing = createLeases(db, blueprint, 6);
  const cordoned = ask(db, { kind: 'resource', id: resourceId! }, 'cordon');
  const [late] = await Promise.all([racing, cordoned]);
  await waitFor('the resource to be in maintenance', async () => (await resourceState(db, resourceId!)).state === 'maintenance');
  await waitForQuietQueues(db);

  const { grants, cordonedAt } = await grantsAndCordon(db, resourceId!);
  expect(cordonedAt).toBeDefined();
  expect(grants.filter((id) => id > cordonedAt!)).toEqual([]);
  // Those not granted before the cordon wait at the blueprint (its one resource is out of service).
  const lateStates = await db
    .selectFrom('leases')
    .select(['id', 'state'])
    .where(
      'id',
      'in',
      late.map((l) => l.id),
    )
    .execute();
  const waiting = lateStates.filter((l) => l.state === 'pending').map((l) => l.id);
  const grantedEarly = lateStates.filter((l) => l.state === 'active').map((l) => l.id);
  expect(waiting.length + grantedEarly.length).toBe(late.length);
  expect(waiting.length).toBeGreaterThanOrEqual(late.length - 2);

  // The leases on it carry on and their releases go through.
  const onIt = [first!.id, second!.id, ...grantedEarly];
  for (const id of shuffle([...onIt])) await releaseLease(db, id);
  await waitForLeases(db, onIt, ['destroyed']);
  await waitForQuietQueues(db);
  expect(await resourceState(db, resourceId!)).toEqual({ state: 'maintenance', used_slots: 0 });
  expect(
    (await db.selectFrom('leases').select('state').where('id', 'in', waiting).execute()).every((l) => l.state === 'pending'),
    'nothing was granted on the cordoned resource',
  ).toBe(true);

  // Uncordoned, it serves the waiting line up to its capacity.
  await ask(db, { kind: 'resource', id: resourceId! }, 'uncordon');
  const served = Math.min(waiting.length, 4);
  await waitFor(`${served} waiting lease(s) to be active`, async () => {
    const rows = await db.selectFrom('leases').select('state').where('id', 'in', waiting).execute();
    return rows.filter((l) => l.state === 'active').length === served;
  });
  for (const { resourceId: id, peak, capacity } of await peakSlotsUsed(db, blueprint.id)) {
    expect(peak, `resource ${id}`).toBeLessThanOrEqual(capacity);
  }
  expect(trailBreaks(await stateTrails(db, 'resource'))).toEqual([]);
  expect(cluster.workers.errors()).toEqual([]);
}, 120_000);

test("a blueprint's cordon puts each active resource into maintenance, with who asked and why; its uncordon puts them back", async () => {
  const db = cluster.database.db;
  const blueprint = await simulatedBlueprint(db, 'maint-all', { maxResources: 3, leasesPerResource: 1 }, { latencyMs: { min: 0, max: 10 } });
  const leases = await createLeases(db, blueprint, 3);
  await waitForLeases(
    db,
    leases.map((l) => l.id),
    ['active'],
  );
  const resources = async () => db.selectFrom('resources').select(['id', 'state']).where('blueprint_id', '=', blueprint.id).orderBy('id').execute();

  await ask(db, { kind: 'blueprint', id: blueprint.id }, 'cordon');
  await waitFor('every resource to be in maintenance', async () => (await resources()).every((r) => r.state === 'maintenance'));
  expect(await resources()).toHaveLength(3);

  // Each resource's cordon was caused by the blueprint's, which records the operator and the reason.
  const cordons = await db
    .selectFrom('commands as c')
    .innerJoin('commands as cause', 'cause.id', 'c.caused_by')
    .select(['c.target_id', 'c.status', 'cause.issued_by', 'cause.reason', 'cause.target_kind'])
    .where('c.kind', '=', 'cordon')
    .where('c.target_kind', '=', 'resource')
    .where('cause.target_id', '=', blueprint.id)
    .execute();
  expect(cordons).toHaveLength(3);
  expect(cordons.every((d) => d.status === 'done' && d.issued_by === 'tester' && d.reason === 'kernel update' && d.target_kind === 'blueprint')).toBe(
    true,
  );

  // A release of a lease on a cordoned resource goes through; nothing new is granted anywhere.
  await releaseLease(db, leases[0]!.id);
  const [newcomer] = await createLeases(db, blueprint, 1);
  await waitForLeases(db, [leases[0]!.id], ['destroyed']);
  await waitForQuietQueues(db);
  expect((await db.selectFrom('leases').select('state').where('id', '=', newcomer!.id).executeTakeFirstOrThrow()).state).toBe('pending');

  await ask(db, { kind: 'blueprint', id: blueprint.id }, 'uncordon');
  await waitFor('every resource to be active', async () => (await resources()).every((r) => r.state === 'active'));
  await waitForLeases(db, [newcomer!.id], ['active']);
  expect(cluster.workers.errors()).toEqual([]);
}, 120_000);
