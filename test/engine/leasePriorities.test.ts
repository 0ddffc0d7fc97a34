import { sql } from 'kysely';
import { expect, test } from 'vitest';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { appendCommand } from '../../src/queue/appendCommand.ts';
import { handDrainSuite } from '../gc/support/handDrain.ts';

// The order a blueprint serves its line in, with the drain run by hand:
// request time less priority × the blueprint's step.
const alice = { issuedBy: 'alice@host', source: 'cli' } as const;
const { db, hand } = handDrainSuite();

const state = async (id: number) => (await db().selectFrom('leases').select('state').where('id', '=', id).executeTakeFirstOrThrow()).state;
const release = async (id: number) => {
  await appendCommand(db(), { target: { kind: 'lease', id }, kind: 'release', actor: alice });
  await hand.all();
};
const request = async (blueprint: string, holder: string, priority?: number) =>
  (await createLease(db(), { blueprint, holder, ...(priority === undefined ? {} : { priority }) }, alice)).lease.id;

/** A one-slot blueprint whose slot is held: returns the holder's lease. */
async function heldPool(name: string, priorityStepMs?: number): Promise<number> {
  await createBlueprint(
    db(),
    { name, driver: 'simulated', maxResources: 1, leasesPerResource: 1, ...(priorityStepMs === undefined ? {} : { priorityStepMs }) },
    alice,
  );
  const holder = await request(name, 'holder');
  await hand.all();
  expect(await state(holder)).toBe('active');
  return holder;
}

/** Frees the slot `holding` has, and returns the lease that then got it. */
async function next(holding: number, waiters: number[]): Promise<number> {
  await release(holding);
  const active = [];
  for (const id of waiters) if ((await state(id)) === 'active') active.push(id);
  expect(active).toHaveLength(1);
  return active[0]!;
}

test('a higher priority is served first; equal priorities in request order; each grant says why it was chosen', async () => {
  let holding = await heldPool('urgent');
  const [a, b, c, d] = [await request('urgent', 'a'), await request('urgent', 'b'), await request('urgent', 'c', 5), await request('urgent', 'd', 9)];
  await hand.all();
  const order: number[] = [];
  const waiting = [a!, b!, c!, d!];
  for (let i = 0; i < 4; i++) {
    holding = await next(
      holding,
      waiting.filter((id) => !order.includes(id)),
    );
    order.push(holding);
  }
  expect(order).toEqual([d, c, a, b]);
  const acquire = await db()
    .selectFrom('commands')
    .select('reason')
    .where('kind', '=', 'acquire')
    .where(sql<boolean>`(payload->>'leaseId')::bigint = ${c!}`)
    .executeTakeFirstOrThrow();
  expect(acquire.reason).toMatch(
    new RegExp(
      `^lease ${c} chosen for a slot: priority 5; team default's share 1, held [\\d.]+ lately \\(half-life 1h\\), holds 0 now; waited [\\dmsh.]+$`,
    ),
  );
  // The lease's own grant carries it: its timeline and GET /v1/leases/{id} say why it was chosen.
  const grant = await db().selectFrom('commands').select('reason').where('target_id', '=', c!).where('kind', '=', 'grant').executeTakeFirstOrThrow();
  expect(grant.reason).toMatch(
    new RegExp(
      `^resource \\d+ has a slot — lease ${c} chosen for a slot: priority 5; team default's share 1, held [\\d.]+ lately \\(half-life 1h\\), holds 0 now; waited [\\dmsh.]+$`,
    ),
  );
  await release(holding);
});

test('no starvation: a lease that has waited longer than a priority is worth goes ahead of it', async () => {
  const holding = await heldPool('aging');
  // Requested 10 minutes ago (the step is a minute): ahead of a priority-9 lease requested now.
  const old = await request('aging', 'patient');
  await db().updateTable('leases').set({ created_at: sql`now() - interval '10 minutes'` }).where('id', '=', old).execute();
  const urgent = await request('aging', 'urgent', 9);
  await hand.all();
  const first = await next(holding, [old, urgent]);
  expect(first).toBe(old);
  expect(await next(first, [urgent])).toBe(urgent);
  await release(urgent);
});

test('a blueprint whose priority step is off serves in request order whatever the priority', async () => {
  let holding = await heldPool('fifo', 0);
  const [low, high] = [await request('fifo', 'low'), await request('fifo', 'high', 9)];
  await hand.all();
  holding = await next(holding, [low!, high!]);
  expect(holding).toBe(low);
  expect(await next(holding, [high!])).toBe(high);
  await release(high!);
});
