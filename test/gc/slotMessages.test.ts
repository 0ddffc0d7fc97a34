import { expect, test } from 'vitest';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { appendCommand } from '../../src/queue/appendCommand.ts';
import { commandsOf } from '../helpers/objectHistory.ts';
import { handDrainSuite } from './support/handDrain.ts';

// What the commands that pass a slot from one lease to the next say, read
// in the order they were applied: none contradicts the one before. The
// drain is run by hand.
const alice = { issuedBy: 'alice@host', source: 'cli' } as const;
const { db, hand } = handDrainSuite();

test('a slot passed to a waiting lease: the count between the blueprint sending it and its grant says a lease is on its way', async () => {
  await createBlueprint(db(), { name: 'one', driver: 'simulated', maxResources: 1, leasesPerResource: 1 }, alice);
  const first = (await createLease(db(), { blueprint: 'one', holder: 'first' }, alice)).lease.id;
  await hand.all();
  const next = (await createLease(db(), { blueprint: 'one', holder: 'next' }, alice)).lease.id;
  await hand.all();
  await appendCommand(db(), { target: { kind: 'lease', id: first }, kind: 'release', actor: alice });
  await hand.all();

  const resourceId = (await db().selectFrom('leases').select('resource_id').where('id', '=', next).executeTakeFirstOrThrow()).resource_id!;
  const told = (await commandsOf(db(), 'resource', resourceId)).map((c) => `${c.kind}: ${c.message}`);
  expect(told.slice(-2)).toEqual([`count_slots: no slot taken yet: 1 lease(s) on the way to take one`, `acquire: granted slot 0 to lease ${next}`]);
});
