import { sql } from 'kysely';
import { expect, test } from 'vitest';
import { readState } from '../../src/metrics/scrape.ts';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { updateBlueprint } from '../../src/objects/updateBlueprint.ts';
import { appendCommand, appendInTransaction } from '../../src/queue/appendCommand.ts';
import { handDrainedDatabase } from '../helpers/drainByHand.ts';
import { commandsOf } from '../helpers/objectHistory.ts';

// A blueprint's requests for slots (need_resource) and its waiting line:
// requests decided in runs, the leases they are for read once for the run;
// a line longer than one read of it (64 rows) and than what a decision
// counts (100), read from the head only while there is room, so a decision
// that serves nobody reads none of it. Drained by hand, one step at a time,
// so what one step decided can be looked at.
const alice = { issuedBy: 'alice@host', source: 'cli' } as const;
const { drain, db } = handDrainedDatabase({ poolSize: 6 });

const statesOf = async (ids: readonly number[]) =>
  (await db().selectFrom('leases').select('state').where('id', 'in', ids).execute()).map((l) => l.state);
const lineLength = async (blueprintId: number) =>
  (
    await db()
      .selectFrom('blueprint_waiters')
      .select(sql<number>`count(*)::int`.as('n'))
      .where('blueprint_id', '=', blueprintId)
      .executeTakeFirstOrThrow()
  ).n;

const blueprint = (name: string, maxResources: number) =>
  createBlueprint(db(), { name, driver: 'simulated', maxResources, leasesPerResource: 1, settings: { latencyMs: { min: 0, max: 0 } } }, alice);

test('a burst of requests, most from leases released meanwhile, is decided in one step: the gone ones cost nothing, the rest are served', async () => {
  const { id } = await blueprint('burst', 1);
  const leases = [];
  for (let i = 0; i < 10; i++) leases.push((await createLease(db(), { blueprint: 'burst', holder: `h${i}` }, alice)).lease);
  for (const lease of leases.slice(0, 9)) {
    await appendCommand(db(), { target: { kind: 'lease', id: lease.id }, kind: 'release', actor: alice });
    await drain().drain('lease', lease.id);
  }
  await drain().drain('blueprint', id);
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
  await drain().drain('blueprint', id);
  const [, first, second] = await commandsOf(db(), 'blueprint', id);
  expect(first!.message).toMatch(new RegExp(`^lease ${lease.id} needs a slot; allocating resource (\\d+) for lease ${lease.id} \\(2 of 2\\)$`));
  const made = /allocating resource (\d+)/.exec(first!.message!)![1];
  expect(second!.message).toBe(`resource ${made} is already being made for lease ${lease.id}`);
  // Both in the one step (a failed commit would have been tried again one command at a time).
  expect(second!.finished_at).toEqual(first!.finished_at);
  const resources = await db().selectFrom('resources').select('id').where('allocated_for_lease_id', '=', lease.id).execute();
  expect(resources.map((r) => String(r.id))).toEqual([made]);
});

test('a request from a lease granted a slot, the grant still on its way to the lease, leaves no row in the line', async () => {
  const { id } = await blueprint('crossing', 1);
  const { lease: holder } = await createLease(db(), { blueprint: 'crossing', holder: 'holder' }, alice);
  await drain().all();
  const { lease: next } = await createLease(db(), { blueprint: 'crossing', holder: 'next' }, alice);
  await drain().drain('blueprint', id);
  expect(await lineLength(id)).toBe(1);
  // The holder leaves; its slot goes back; the blueprint sends `next` to the resource, which grants it.
  await appendCommand(db(), { target: { kind: 'lease', id: holder.id }, kind: 'release', actor: alice });
  await drain().drain('lease', holder.id);
  const { resource_id: resourceId } = await db().selectFrom('leases').select('resource_id').where('id', '=', holder.id).executeTakeFirstOrThrow();
  await drain().drain('resource', resourceId!);
  await drain().drain('blueprint', id);
  expect(await lineLength(id)).toBe(0);
  await drain().drain('resource', resourceId!);
  expect(await statesOf([next.id])).toEqual(['pending']);
  // A request of `next` reaches the blueprint before the grant reaches
  // `next`, as one does when a refusal of an earlier acquire crossed the grant.
  await appendInTransaction(
    db(),
    { target: { kind: 'blueprint', id }, kind: 'need_resource', payload: { leaseId: next.id }, actor: alice },
    { fromOutside: false },
  );
  await drain().drain('blueprint', id);
  expect((await commandsOf(db(), 'blueprint', id)).at(-1)!.message).toBe(`lease ${next.id} already holds a slot on resource ${resourceId}`);
  expect(await lineLength(id)).toBe(0);
  await drain().all();
  expect(await statesOf([next.id])).toEqual(['active']);
  expect(await lineLength(id)).toBe(0);
});

test('a slot freed in the step that puts a lease in line reaches that lease: the blueprint decides before the resource', async () => {
  const { id } = await blueprint('same-step', 1);
  const { lease: holder } = await createLease(db(), { blueprint: 'same-step', holder: 'holder' }, alice);
  await drain().all();
  const { resource_id: resourceId } = await db().selectFrom('leases').select('resource_id').where('id', '=', holder.id).executeTakeFirstOrThrow();
  // The holder leaves: its slot's return waits in the resource's queue.
  await appendCommand(db(), { target: { kind: 'lease', id: holder.id }, kind: 'release', actor: alice });
  await drain().drain('lease', holder.id);
  // A new lease asks the full blueprint for a slot.
  const { lease: next } = await createLease(db(), { blueprint: 'same-step', holder: 'next' }, alice);
  await drain().drain('lease', next.id);
  // One step decides both: the slot's return and the request. Decided the
  // other way round (as the lane took them: the claim takes the older
  // wake-up, the resource's, first), the resource would find nobody in line
  // to offer its slot to, and the blueprint, reading the resource's row as
  // it was before the step, no free slot: the lease would wait beside a free
  // slot until some other slot came back.
  await drain().together([
    { kind: 'resource', id: resourceId! },
    { kind: 'blueprint', id },
  ]);
  await drain().all();
  expect(await statesOf([next.id])).toEqual(['active']);
  expect(await lineLength(id)).toBe(0);
});

test('a long line is served from its head in order, past pages of leases that left it, and counted up to a hundred', async () => {
  const long = await blueprint('long', 1);
  const holder = (await createLease(db(), { blueprint: 'long', holder: 'first' }, alice)).lease;
  await drain().all();
  expect(await statesOf([holder.id])).toEqual(['active']);

  const waiters: number[] = [];
  for (let i = 0; i < 150; i++) waiters.push((await createLease(db(), { blueprint: 'long', holder: `waiter ${i}` }, alice)).lease.id);
  await drain().all();
  expect(await lineLength(long.id)).toBe(150);
  // Each joined with no room: its place counted exactly up to 100, beyond that as "100 or more".
  const waiting = await db()
    .selectFrom('events')
    .select(['message', sql<number>`(data->>'leaseId')::int`.as('leaseId')])
    .where('target_kind', '=', 'blueprint')
    .where('target_id', '=', long.id)
    .where('type', '=', 'lease_waiting')
    .orderBy('id')
    .execute();
  expect(waiting.map((e) => e.leaseId)).toEqual(waiters);
  const ahead = waiting.map((e) => /; (\d+( or more)?) waiting ahead$/.exec(e.message)?.[1]);
  expect(ahead).toEqual(waiters.map((_, k) => (k <= 100 ? String(k) : '100 or more')));

  // The first 70 give up. Nobody is served, so the blueprint does not read
  // the line: their rows stay until a serving reaches them.
  for (const id of waiters.slice(0, 70)) await appendCommand(db(), { target: { kind: 'lease', id }, kind: 'release', actor: alice });
  await drain().all();
  expect(new Set(await statesOf(waiters.slice(0, 70)))).toEqual(new Set(['destroyed']));
  expect(await lineLength(long.id)).toBe(150);
  // Yet the metrics count only the leases that still wait.
  const gauges = await readState(db(), { staleAfterMs: 60_000, heartbeatMs: 10_000 });
  expect(gauges.waitingLeases).toEqual([{ blueprint: 'long', count: 80 }]);

  // A lease released before its blueprint decided on it: the decision
  // changes neither the line nor the room, so it does not serve the line.
  const { lease: late, command: asked } = await createLease(db(), { blueprint: 'long', holder: 'late' }, alice);
  await appendCommand(db(), { target: { kind: 'lease', id: late.id }, kind: 'release', actor: alice });
  await drain().drain('lease', late.id);
  await drain().all();
  const decided = await db().selectFrom('commands').select(['status', 'message']).where('id', '=', asked.id).executeTakeFirstOrThrow();
  expect(decided).toEqual({ status: 'done', message: `lease ${late.id} no longer needs capacity` });
  expect(await lineLength(long.id)).toBe(150);

  // Room for ten: the ten oldest leases still waiting get it, read past the
  // 70 rows of those that left (more than a page), which go.
  await db()
    .transaction()
    .execute((trx) => updateBlueprint(trx, long.id, { maxResources: 11 }, alice));
  await drain().all();
  expect(new Set(await statesOf(waiters.slice(70, 80)))).toEqual(new Set(['active']));
  expect(new Set(await statesOf(waiters.slice(80)))).toEqual(new Set(['pending']));
  expect(await lineLength(long.id)).toBe(70);
  const served = await db()
    .selectFrom('commands')
    .select('message')
    .where('target_kind', '=', 'blueprint')
    .where('target_id', '=', long.id)
    .where('kind', '=', 'serve_waiters')
    .executeTakeFirstOrThrow();
  // The 70 still waiting are counted (up to a hundred: a longer line says "100 or more").
  expect(served.message).toMatch(/; 70 lease\(s\) wait \(at its limit; 11 of 11 live, no free slot\)$/);
  for (const id of waiters.slice(70, 80)) expect(served.message).toContain(`for lease ${id} `);
});
