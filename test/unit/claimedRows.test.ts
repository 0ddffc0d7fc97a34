import { expect, onTestFinished, test } from 'vitest';
import { claimStatement } from '../../src/drain/sql/claim.ts';
import { claimedRowsStatements } from '../../src/drain/sql/claimedRows.ts';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import type { ObjectRef } from '../../src/queue/objectTables.ts';
import { wakeObjectsQuery } from '../../src/queue/wakeObjects.ts';
import { handDrainedDatabase } from '../helpers/drainByHand.ts';

/**
 * A drain reads the rows of what its claim took in the claim's own round
 * trip (sql/claimedRows.ts): the claim names the objects it locked in
 * settings of its transaction, whether or not the drain asked for them by
 * name, and the reads after it find exactly those rows.
 */
const alice = { issuedBy: 'alice@host', source: 'cli' } as const;
const { database, drain, db } = handDrainedDatabase({ poolSize: 4 });

/** A lease active on a resource of a blueprint, with nothing left to drain. */
async function activeLease(name: string) {
  const blueprint = await createBlueprint(db(), { name, driver: 'simulated', maxResources: 1, leasesPerResource: 1 }, alice);
  const { lease } = await createLease(db(), { blueprint: name, holder: 'a' }, alice);
  await drain().all();
  const { resource_id } = await db().selectFrom('leases').select('resource_id').where('id', '=', lease.id).executeTakeFirstOrThrow();
  return { blueprintId: blueprint.id, leaseId: lease.id, resourceId: resource_id! };
}

/** A transaction on a connection of its own: the claim, then the reads, as a lane sends them. */
async function claimThenRead(room: number, want: readonly ObjectRef[], held: readonly ObjectRef[]) {
  const client = await database().pool.connect();
  onTestFinished(() => client.release());
  const run = async (query: { sql: string; parameters: readonly unknown[] }) => (await client.query(query.sql, [...query.parameters])).rows;
  await client.query('begin');
  await run(claimStatement(room, want, held));
  const [leases, resources, blueprints] = await Promise.all(claimedRowsStatements().map(run));
  const ids = (rows: { id: number }[] | undefined) => (rows ?? []).map((r) => Number(r.id)).sort((a, b) => a - b);
  const read = { leases: ids(leases), resources: ids(resources), blueprints: ids(blueprints) };
  // Unlocks what the claim locked (session locks outlive the transaction).
  await client.query('commit');
  await client.query('select pg_advisory_unlock_all()');
  return { read, again: () => Promise.all(claimedRowsStatements().map(run)) };
}

test('the rows read after a claim are those of every object it locked, named or not, with their blueprints', async () => {
  const a = await activeLease('claimed-a');
  const b = await activeLease('claimed-b');
  const woken: ObjectRef[] = [
    { kind: 'lease', id: a.leaseId },
    { kind: 'resource', id: b.resourceId },
    { kind: 'blueprint', id: b.blueprintId },
  ];
  await wakeObjectsQuery(woken).execute(db());
  // Only the lease is asked for by name; the claim takes the other two as the oldest due.
  const { read, again } = await claimThenRead(10, [woken[0]!], []);
  expect(read).toEqual({
    leases: [a.leaseId],
    resources: [b.resourceId],
    // The blueprint woken, and the lease's, which the drain holds it with.
    blueprints: [a.blueprintId, b.blueprintId].sort((x, y) => x - y),
  });
  // The names last only as long as the claim's transaction.
  expect(await again()).toEqual([[], [], []]);
});

test('an object the drain holds already loses its wake-up to a claim, and its row is not read again', async () => {
  const a = await activeLease('held-a');
  const b = await activeLease('held-b');
  const lease: ObjectRef = { kind: 'lease', id: a.leaseId };
  const other: ObjectRef = { kind: 'lease', id: b.leaseId };
  await wakeObjectsQuery([lease, other]).execute(db());
  const { read } = await claimThenRead(10, [], [lease]);
  expect(read).toEqual({ leases: [b.leaseId], resources: [], blueprints: [b.blueprintId] });
  const left = await db().selectFrom('drain_wakeups').select('target_id').where('target_kind', '=', 'lease').execute();
  expect(left).toEqual([]);
});

test('a claim with no room takes nothing, and no rows are read', async () => {
  const a = await activeLease('no-room');
  await wakeObjectsQuery([{ kind: 'lease', id: a.leaseId }]).execute(db());
  const { read } = await claimThenRead(0, [], []);
  expect(read).toEqual({ leases: [], resources: [], blueprints: [] });
  await drain().all();
});
