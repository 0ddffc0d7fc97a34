import { sql } from 'kysely';
import { expect, test } from 'vitest';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { appendCommand } from '../../src/queue/appendCommand.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { commandsOf, stateEvents } from '../helpers/objectHistory.ts';
import { handDrainSuite } from './support/handDrain.ts';

// Wait deadlines with the drain and the collector run by hand: each race is
// set up in the exact order the test names. Each test has a blueprint of
// one slot of its own, taken by a first lease, so a second one waits.
const alice = { issuedBy: 'alice@host', source: 'cli' } as const;
const { db, hand } = handDrainSuite();

const lease = (id: number) => db().selectFrom('leases').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
const releasesOf = async (id: number) => (await commandsOf(db(), 'lease', id)).filter((c) => c.kind === 'release');
const release = (id: number, actor: { issuedBy: string; source: 'cli' | 'gc' } = alice, payload?: object) =>
  appendCommand(db(), { target: { kind: 'lease', id }, kind: 'release', payload, actor });

let pools = 0;
/** A blueprint of one slot, held by an active lease: returns the blueprint's name and that lease. */
async function fullPool(): Promise<{ blueprint: string; holder: number }> {
  const blueprint = `single-${++pools}`;
  await createBlueprint(db(), { name: blueprint, driver: 'simulated', maxResources: 1, leasesPerResource: 1 }, alice);
  const { lease: first } = await createLease(db(), { blueprint, holder: 'first' }, alice);
  await hand.all();
  expect((await lease(first.id)).state).toBe('active');
  return { blueprint, holder: first.id };
}

async function waitingLease(blueprint: string, waitTimeoutMs: number): Promise<number> {
  const { lease: created } = await createLease(db(), { blueprint, holder: 'second', waitTimeoutMs }, alice);
  await hand.all();
  expect((await lease(created.id)).state).toBe('pending');
  return created.id;
}

/** Waits until the database's clock is past the lease's wait deadline. */
async function waitUntilPast(id: number) {
  await waitFor(`lease ${id} to be past its wait deadline`, async () => {
    const { rows } = await sql<{ past: boolean }>`select wait_deadline < now() as past from leases where id = ${id}`.execute(db());
    return rows[0]!.past;
  });
}

/** The lease ids a pass asked to release. */
const released = (pass: Awaited<ReturnType<typeof hand.pass>>) =>
  (pass.steps.expireLeases?.actions ?? []).filter((a) => a.kind === 'release').map((a) => Number(a.target.split(':')[1]));

/** The leases waiting at a blueprint, as every reader of the line sees them (a row of a lease that left is removed when next read). */
const waitersAt = async (blueprint: string) =>
  (
    await db()
      .selectFrom('blueprint_waiters as w')
      .innerJoin('blueprints as b', 'b.id', 'w.blueprint_id')
      .innerJoin('leases as l', 'l.id', 'w.lease_id')
      .select('w.lease_id')
      .where('b.name', '=', blueprint)
      .where('l.state', '=', 'pending')
      .execute()
  ).map((w) => w.lease_id);

test('the deadline is the request time plus the wait timeout, on the database clock', async () => {
  const before = Date.now();
  const { lease: created } = await createLease(db(), { blueprint: (await fullPool()).blueprint, holder: 'x', waitTimeoutMs: 600_000 }, alice);
  const deadline = created.wait_deadline!.getTime() - created.created_at.getTime();
  expect(deadline).toBe(600_000);
  expect(created.wait_deadline!.getTime()).toBeGreaterThanOrEqual(before + 600_000 - 1000);
  await release(created.id);
  await hand.all();
});

test('a lease still waiting at its deadline is released once, as system:deadline with the reason, and leaves the line; nothing leaks', async () => {
  const { blueprint, holder } = await fullPool();
  const id = await waitingLease(blueprint, 1000);
  expect(await waitersAt(blueprint)).toEqual([id]);
  await waitUntilPast(id);
  expect(released(await hand.pass())).toEqual([id]);
  // A second pass before the release is applied does not ask again.
  expect(released(await hand.pass())).toEqual([]);
  await hand.all();

  const releases = await releasesOf(id);
  expect(releases).toHaveLength(1);
  expect(releases[0]).toMatchObject({
    issued_by: 'system:deadline',
    source: 'gc',
    status: 'done',
    message: 'released before it got a slot, and destroyed',
    payload: { ifExpired: true },
  });
  expect(releases[0]!.reason).toMatch(/^deadline: not active by its wait deadline \S+ \S+Z \(1s after it was requested\)$/);
  expect(await stateEvents(db(), 'lease', id)).toEqual(['pending→released', 'released→destroyed']);
  expect(await waitersAt(blueprint)).toEqual([]);
  // The holder's lease is untouched, and its slot serves the next lease once it goes.
  expect((await lease(holder)).state).toBe('active');
  await release(holder);
  await hand.all();
  const { lease: next } = await createLease(db(), { blueprint, holder: 'third' }, alice);
  await hand.all();
  expect((await lease(next.id)).state).toBe('active');
  await release(next.id);
  await hand.all();
});

test('a lease granted before its deadline keeps its slot after the deadline passes: the collector does not ask', async () => {
  const { blueprint, holder } = await fullPool();
  const id = await waitingLease(blueprint, 1000);
  await release(holder);
  await hand.all();
  expect((await lease(id)).state).toBe('active');
  await waitUntilPast(id);
  expect(released(await hand.pass())).toEqual([]);
  expect((await lease(id)).state).toBe('active');
  await release(id);
  await hand.all();
});

test('a grant applied after the collector looked but before its release is applied wins: the release settles as a no-op', async () => {
  const { blueprint, holder } = await fullPool();
  const id = await waitingLease(blueprint, 1000);
  await waitUntilPast(id);
  // The collector saw the lease waiting past its deadline; before its release
  // was queued, the holder gave the slot back and the lease was granted it.
  await release(holder);
  await hand.all();
  expect((await lease(id)).state).toBe('active');
  // The release the collector then queues, as it queues it.
  await release(id, { issuedBy: 'system:deadline', source: 'gc' }, { ifExpired: true });
  await hand.all();
  expect((await lease(id)).state).toBe('active');
  expect(await releasesOf(id)).toEqual([
    expect.objectContaining({ status: 'done', message: 'not released: the lease became active before its wait-deadline release was applied' }),
  ]);
  await release(id);
  await hand.all();
  expect((await lease(id)).state).toBe('destroyed');
});

test('a lease granted a slot but not yet active at its deadline is released, and the slot goes back to its resource', async () => {
  const { blueprint, holder } = await fullPool();
  const id = await waitingLease(blueprint, 1000);
  await waitUntilPast(id);
  // The slot is freed and the resource grants it, but the lease's own grant
  // (which would activate it) is not applied before the collector's pass.
  await release(holder);
  await hand.one('lease', holder);
  for (let i = 0; i < 20 && (await lease(id)).state === 'pending'; i++) {
    const [next] = await db()
      .selectFrom('commands')
      .select(['target_kind', 'target_id'])
      .where('status', 'in', ['queued', 'running'])
      .where('target_kind', '!=', 'lease')
      .orderBy('id')
      .execute();
    if (!next) break;
    await hand.one(next.target_kind, next.target_id);
  }
  const grant = (await commandsOf(db(), 'lease', id)).find((c) => c.kind === 'grant');
  expect(grant?.status).toBe('queued');
  expect(released(await hand.pass())).toEqual([id]);
  await hand.all();
  const after = await lease(id);
  expect(after.state).toBe('destroyed');
  expect(await stateEvents(db(), 'lease', id)).not.toContain('acquired→active');
  // The slot went back: the resource has none in use, and a new lease gets it.
  const { lease: next } = await createLease(db(), { blueprint, holder: 'third' }, alice);
  await hand.all();
  expect((await lease(next.id)).state).toBe('active');
  await release(next.id);
  await hand.all();
});
