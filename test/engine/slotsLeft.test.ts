import type pg from 'pg';
import { expect, test } from 'vitest';
import { returnSlotsStatement } from '../../src/drain/sql/returnSlots.ts';
import { slotsLeft, slotsLeftStatement } from '../../src/drain/sql/slotsLeft.ts';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { handDrainedDatabase } from '../helpers/drainByHand.ts';
import { waitFor } from '../helpers/waitFor.ts';

/**
 * The lock protocol by which a lease that gives back a resource's last
 * slot learns it without the resource's lock (sql/slotsLeft.ts): two
 * leases give back the resource's last two slots at once, in two
 * transactions on two connections, in each order their statements can
 * interleave; whichever commits last must find the resource emptied.
 */
const alice = { issuedBy: 'alice@host', source: 'cli' } as const;
const { database, drain, db } = handDrainedDatabase({ poolSize: 6 });

/** A resource with two slots, each held by an active lease. */
async function fullResource(name: string) {
  const b = await createBlueprint(db(), { name, driver: 'simulated', maxResources: 1, leasesPerResource: 2 }, alice);
  const leases = [];
  for (const holder of ['a', 'b']) leases.push((await createLease(db(), { blueprint: name, holder }, alice)).lease.id);
  await drain().all();
  const { id: resourceId } = await db().selectFrom('resources').select('id').where('blueprint_id', '=', b.id).executeTakeFirstOrThrow();
  expect(await db().selectFrom('resource_slots').select('lease_id').where('resource_id', '=', resourceId).orderBy('lease_id').execute()).toEqual(
    leases.map((lease_id) => ({ lease_id })),
  );
  return { blueprintId: b.id, resourceId, leases };
}

/** One lease's return, on a connection of its own, statement by statement. */
async function returner(resource: { blueprintId: number; resourceId: number }, leaseId: number) {
  const client: pg.PoolClient = await database().pool.connect();
  const run = async (query: { sql: string; parameters: readonly unknown[] }) => (await client.query(query.sql, [...query.parameters])).rows;
  await client.query('begin');
  return {
    pid: (await client.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid,
    delete: () => run(returnSlotsStatement([{ ...resource, leaseId }])),
    emptied: async () => slotsLeft(await run(slotsLeftStatement([resource.resourceId])))[0]!.emptied,
    async commit() {
      await client.query('commit');
      client.release();
    },
  };
}

const waitingOnLock = async (pid: number) =>
  (await database().pool.query<{ wait: string | null }>('select wait_event_type as wait from pg_stat_activity where pid = $1', [pid])).rows[0]
    ?.wait === 'Lock';

test('both delete before either looks: each skips the row the other is deleting, and both find the resource emptied', async () => {
  const resource = await fullResource('both-delete-first');
  const [first, second] = [await returner(resource, resource.leases[0]!), await returner(resource, resource.leases[1]!)];
  await first.delete();
  await second.delete();
  expect(await first.emptied()).toBe(true);
  expect(await second.emptied()).toBe(true);
  await first.commit();
  await second.commit();
});

test('one looks before the other deletes: it sees that slot, and the other, made to wait for its commit, finds the resource emptied', async () => {
  const resource = await fullResource('look-then-delete');
  const [first, second] = [await returner(resource, resource.leases[0]!), await returner(resource, resource.leases[1]!)];
  await first.delete();
  expect(await first.emptied()).toBe(false);
  // The second delete waits for the first transaction's key-share lock on its row.
  const deleted = second.delete();
  await waitFor('the second delete to wait for the first return', () => waitingOnLock(second.pid));
  await first.commit();
  await deleted;
  expect(await second.emptied()).toBe(true);
  await second.commit();
});

test('a slot nobody gives back is left: a return of the other finds the resource not emptied', async () => {
  const resource = await fullResource('one-left');
  const only = await returner(resource, resource.leases[0]!);
  await only.delete();
  expect(await only.emptied()).toBe(false);
  await only.commit();
  expect(await db().selectFrom('resource_slots').select('lease_id').where('resource_id', '=', resource.resourceId).execute()).toEqual([
    { lease_id: resource.leases[1] },
  ]);
});
