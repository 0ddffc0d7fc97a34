import { afterAll, beforeAll, expect, test } from 'vitest';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { appendCommand, appendInTransaction } from '../../src/queue/appendCommand.ts';
import { type DrainByHand, drainByHand } from '../helpers/drainByHand.ts';
import { commandsOf } from '../helpers/objectHistory.ts';
import { createTestDatabase } from '../helpers/testDatabase.ts';

// A blueprint's requests for slots (need_resource) decided in runs, the
// leases they are for read once for the run: drained by hand, one step at a
// time, so what one step decided can be looked at.
const alice = { issuedBy: 'alice@host', source: 'cli' } as const;
let database: Awaited<ReturnType<typeof createTestDatabase>>;
let drain: DrainByHand;
const db = () => database.db;

beforeAll(async () => {
  database = await createTestDatabase({ poolSize: 6 });
  drain = drainByHand(database);
});
afterAll(async () => database?.drop());

const blueprint = (name: string, maxResources: number) =>
  createBlueprint(db(), { name, driver: 'simulated', maxResources, leasesPerResource: 1, settings: { latencyMs: { min: 0, max: 0 } } }, alice);

test('a burst of requests, most from leases released meanwhile, is decided in one step: the gone ones cost nothing, the rest are served', async () => {
  const { id } = await blueprint('burst', 1);
  const leases = [];
  for (let i = 0; i < 10; i++) leases.push((await createLease(db(), { blueprint: 'burst', holder: `h${i}` }, alice)).lease);
  for (const lease of leases.slice(0, 9)) {
    await appendCommand(db(), { target: { kind: 'lease', id: lease.id }, kind: 'release', actor: alice });
    await drain.drain('lease', lease.id);
  }
  await drain.drain('blueprint', id);
  const decided = await commandsOf(db(), 'blueprint', id);
  expect(decided.map((c) => c.status)).toEqual(Array(10).fill('done'));
  // Two steps (a transaction each, so a finish time each): the claim takes
  // the first request, and the step after it the run of the other nine.
  expect(decided.map((c) => c.finished_at!.getTime())).toEqual([
    decided[0]!.finished_at!.getTime(),
    ...Array(9).fill(decided[1]!.finished_at!.getTime()),
  ]);
  expect(decided.slice(0, 9).map((c) => c.message)).toEqual(leases.slice(0, 9).map((l) => `lease ${l.id} no longer needs capacity`));
  expect(decided[9]!.message).toMatch(
    new RegExp(`^lease ${leases[9]!.id} needs a slot; allocating resource \\d+ for lease ${leases[9]!.id} \\(1 of 1\\)$`),
  );
});

test("a lease's second request in the step that served its first finds the resource made for it, and no second one is made", async () => {
  const { id } = await blueprint('twice', 2);
  // The first request is decided alone (the claim takes one command); the
  // two of the lease looked at here are the run of the step after it.
  await createLease(db(), { blueprint: 'twice', holder: 'before' }, alice);
  const { lease } = await createLease(db(), { blueprint: 'twice', holder: 'twice' }, alice);
  // A second request of the same lease behind the first, as a refused lease's retry would queue.
  await appendInTransaction(
    db(),
    { target: { kind: 'blueprint', id }, kind: 'need_resource', payload: { leaseId: lease.id }, actor: alice },
    { fromOutside: false },
  );
  await drain.drain('blueprint', id);
  const [, first, second] = await commandsOf(db(), 'blueprint', id);
  expect(first!.message).toMatch(new RegExp(`^lease ${lease.id} needs a slot; allocating resource (\\d+) for lease ${lease.id} \\(2 of 2\\)$`));
  const made = /allocating resource (\d+)/.exec(first!.message!)![1];
  expect(second!.message).toBe(`resource ${made} is already being made for lease ${lease.id}`);
  // Both in the one step (a failed commit would have been tried again one command at a time).
  expect(second!.finished_at).toEqual(first!.finished_at);
  const resources = await db().selectFrom('resources').select('id').where('allocated_for_lease_id', '=', lease.id).execute();
  expect(resources.map((r) => String(r.id))).toEqual([made]);
});
