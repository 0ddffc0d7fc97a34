import { sql } from 'kysely';
import { describe, expect, test } from 'vitest';
import { GcPass } from '../../src/gc/GcPass.ts';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { appendCommand } from '../../src/queue/appendCommand.ts';
import { testLog } from '../helpers/testDatabase.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { commandsOf } from '../helpers/objectHistory.ts';
import { handDrainSuite, TEST_GC } from './support/handDrain.ts';

/** A pass made only to call request(), which records nothing of a pass: no gc_passes row is needed. */
const NO_PASS_ROW = 0;

// Reclaim and the warm minimum with the drain and the collector run by hand.
const alice = { issuedBy: 'alice@host', source: 'cli' } as const;
const { db, hand } = handDrainSuite();

const lease = (id: number) => db().selectFrom('leases').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
const resourcesOf = (blueprintId: number) => db().selectFrom('resources').selectAll().where('blueprint_id', '=', blueprintId).orderBy('id').execute();
const release = (kind: 'lease' | 'resource', id: number) => appendCommand(db(), { target: { kind, id }, kind: 'release', actor: alice });
const reclaimsIn = (pass: Awaited<ReturnType<typeof hand.pass>>) =>
  (pass.steps.reclaimIdleResources?.actions ?? []).map((a) => ({
    id: Number(a.target.split(':')[1]),
    reason: a.reason,
    queued: a.commandId !== undefined && !a.coalesced,
  }));

async function blueprint(name: string, limits: { maxResources: number; minResources?: number; idleTimeoutMs?: number }) {
  return createBlueprint(db(), { name, driver: 'simulated', leasesPerResource: 1, ...limits }, alice);
}

async function leases(name: string, count: number): Promise<number[]> {
  const ids: number[] = [];
  for (let i = 0; i < count; i++) ids.push((await createLease(db(), { blueprint: name, holder: `h${i}` }, alice)).lease.id);
  return ids;
}

/**
 * Leaves a blueprint at its limit with idle resources and a lease waiting:
 * the slots its released leases freed never reach the waiter (the
 * blueprint's `slot_freed` is cancelled before it is applied), as when the
 * resources are held idle by work Slipway did not see through to the end.
 */
async function idleWhileWaiting(name: string, resources: number, waiting: number) {
  const b = await blueprint(name, { maxResources: resources });
  const holders = await leases(name, resources);
  await hand.all();
  const waiters = await leases(name, waiting);
  await hand.all();
  for (const id of waiters) expect((await lease(id)).state).toBe('pending');
  for (const id of holders) await release('lease', id);
  for (const id of holders) await hand.one('lease', id);
  for (const r of await resourcesOf(b.id)) await hand.one('resource', r.id);
  await db()
    .updateTable('commands')
    .set({ status: 'cancelled', message: 'test: the free slot never reaches the waiter' })
    .where('target_kind', '=', 'blueprint')
    .where('target_id', '=', b.id)
    .where('kind', '=', 'slot_freed')
    .where('status', '=', 'queued')
    .execute();
  await hand.all();
  for (const r of await resourcesOf(b.id)) expect(r).toMatchObject({ state: 'active', used_slots: 0 });
  for (const id of waiters) expect((await lease(id)).state).toBe('pending');
  return { blueprint: b, waiters };
}

describe('reclaim for waiting leases', () => {
  test('a blueprint at its limit with an idle resource reclaims it, and the waiting lease is served', async () => {
    const { blueprint: b, waiters } = await idleWhileWaiting('full', 1, 1);
    const [idle] = await resourcesOf(b.id);
    // Within the idle grace, nothing is reclaimed.
    expect(reclaimsIn(await hand.pass({ idleGraceMs: 3_600_000 }))).toEqual([]);
    const reclaims = reclaimsIn(await hand.pass());
    expect(reclaims).toEqual([
      { id: idle!.id, queued: true, reason: expect.stringMatching(/blueprint full is at its limit of 1 with 1 lease\(s\) waiting/) },
    ]);
    await hand.all();
    expect((await lease(waiters[0]!)).state).toBe('active');
    const [gone, fresh] = await resourcesOf(b.id);
    expect(gone).toMatchObject({ id: idle!.id, state: 'destroyed' });
    expect(fresh).toMatchObject({ state: 'active', used_slots: 1, allocated_for_lease_id: waiters[0] });
    const reclaim = (await commandsOf(db(), 'resource', idle!.id)).find((c) => c.kind === 'reclaim')!;
    expect(reclaim).toMatchObject({ issued_by: 'system:gc', source: 'gc', status: 'done', message: 'reclaimed' });
  });

  test('one reclaim per waiting lease, counting the room already being made', async () => {
    const { blueprint: b, waiters } = await idleWhileWaiting('two-idle', 3, 2);
    expect(reclaimsIn(await hand.pass()).filter((r) => r.queued)).toHaveLength(2);
    // Passes before the reclaims are applied ask for nothing more...
    expect(reclaimsIn(await hand.pass())).toEqual([]);
    // ...nor while the reclaimed resources are being destroyed.
    const reclaimed = (await resourcesOf(b.id)).filter((r) => r.state === 'active').slice(0, 3);
    for (const r of reclaimed) await hand.one('resource', r.id);
    expect(reclaimsIn(await hand.pass())).toEqual([]);
    await hand.all();
    for (const id of waiters) expect((await lease(id)).state).toBe('active');
    // The first resource destroyed wakes the blueprint, which serves its line
    // from all the room it has: the idle resource left over takes one waiter,
    // a new resource the other.
    const states = (await resourcesOf(b.id)).map((r) => r.state).sort();
    expect(states).toEqual(['active', 'active', 'destroyed', 'destroyed']);
  });
});

describe('reclaim races', () => {
  test('a resource a lease took before the reclaim was applied is not reclaimed', async () => {
    const b = await blueprint('taken', { maxResources: 1 });
    const [first] = await leases('taken', 1);
    await hand.all();
    await release('lease', first!);
    await hand.all();
    const [resource] = await resourcesOf(b.id);
    expect(resource).toMatchObject({ state: 'active', used_slots: 0 });
    // The collector saw it idle; before its reclaim is queued, a lease takes it.
    const [second] = await leases('taken', 1);
    await hand.all();
    expect((await lease(second!)).resource_id).toBe(resource!.id);
    const action = await new GcPass(db(), TEST_GC, NO_PASS_ROW, testLog).request(
      { kind: 'resource', id: resource!.id },
      'reclaim',
      'idle (as the collector saw it)',
    );
    await hand.all();
    const reclaim = (await commandsOf(db(), 'resource', resource!.id)).find((c) => c.id === action.commandId)!;
    expect(reclaim).toMatchObject({ status: 'failed', message: 'not reclaimed: 1 lease(s) hold it' });
    expect((await resourcesOf(b.id))[0]).toMatchObject({ state: 'active', used_slots: 1 });
    expect((await lease(second!)).state).toBe('active');
  });

  test('a lease whose acquire is queued behind a reclaim never lands on the reclaimed resource', async () => {
    const b = await blueprint('behind', { maxResources: 2 });
    const [first] = await leases('behind', 1);
    await hand.all();
    await release('lease', first!);
    await hand.all();
    const [resource] = await resourcesOf(b.id);
    // The new lease's allocate sends an acquire to the idle resource...
    const [next] = await leases('behind', 1);
    await hand.one('lease', next!);
    // ...and the collector's reclaim is queued behind it (preempting it).
    await new GcPass(db(), TEST_GC, NO_PASS_ROW, testLog).request({ kind: 'resource', id: resource!.id }, 'reclaim', 'idle');
    // Refused, the lease asks again a moment later (a yielded retry).
    await waitFor('the lease to be served elsewhere', async () => {
      await hand.all();
      return (await lease(next!)).state === 'active';
    });
    const served = await lease(next!);
    expect(served.state).toBe('active');
    expect(served.resource_id).not.toBe(resource!.id);
    expect((await resourcesOf(b.id))[0]).toMatchObject({ id: resource!.id, state: 'destroyed' });
    const grants = await db()
      .selectFrom('events')
      .select('id')
      .where('target_kind', '=', 'resource')
      .where('target_id', '=', resource!.id)
      .where('type', '=', 'slot_granted')
      .execute();
    expect(grants).toHaveLength(1); // the first lease's, before the reclaim
  });
});

describe('idle timeout and the warm minimum', () => {
  test('idle resources beyond the minimum are reclaimed after the idle timeout; the minimum stays', async () => {
    const b = await blueprint('shrink', { maxResources: 3, minResources: 1, idleTimeoutMs: 60_000 });
    const ids = await leases('shrink', 3);
    await hand.all();
    // Busy resources are never idle.
    expect(reclaimsIn(await hand.pass())).toEqual([]);
    for (const id of ids) await release('lease', id);
    await hand.all();
    expect(reclaimsIn(await hand.pass())).toEqual([]); // not idle long enough yet
    // A minute passes (the idle clock moved back rather than waited out).
    await sql`update resources set idle_since = idle_since - interval '61 seconds' where blueprint_id = ${b.id}`.execute(db());
    const reclaims = reclaimsIn(await hand.pass());
    expect(reclaims).toHaveLength(2);
    expect(reclaims[0]!.reason).toMatch(/longer than blueprint shrink's idle timeout of 1m; 3 kept, minimum 1/);
    await hand.all();
    expect((await resourcesOf(b.id)).filter((r) => r.state === 'active')).toHaveLength(1);
    expect(reclaimsIn(await hand.pass())).toEqual([]);
  });

  test('a blueprint without an idle timeout keeps its idle resources', async () => {
    const b = await blueprint('keep', { maxResources: 2 });
    const ids = await leases('keep', 2);
    await hand.all();
    for (const id of ids) await release('lease', id);
    await hand.all();
    expect(reclaimsIn(await hand.pass())).toEqual([]);
    expect((await resourcesOf(b.id)).filter((r) => r.state === 'active')).toHaveLength(2);
  });

  test('the warm minimum is topped up, within the limit, and again by the blueprint itself after a resource goes', async () => {
    const b = await blueprint('warm', { maxResources: 3, minResources: 2 });
    const pass = await hand.pass();
    expect(pass.steps.topUpWarmMinimum?.actions).toEqual([
      expect.objectContaining({ target: `blueprint:${b.id}`, kind: 'top_up', reason: '0 warm resource(s) of a minimum of 2' }),
    ]);
    expect((await hand.pass()).steps.topUpWarmMinimum?.actions).toEqual([]); // already queued
    await hand.all();
    let resources = await resourcesOf(b.id);
    expect(resources.map((r) => r.state)).toEqual(['active', 'active']);
    expect(resources.every((r) => r.allocated_for_lease_id === null)).toBe(true);
    expect((await hand.pass()).steps.topUpWarmMinimum?.actions).toEqual([]);
    // A warm resource serves a lease straight away.
    const [user] = await leases('warm', 1);
    await hand.all();
    const held = (await lease(user!)).resource_id;
    expect(resources.map((r) => r.id)).toContain(held);
    // An operator releases the other one: once it is destroyed, the blueprint
    // makes another itself (no pass needed), and a pass then finds nothing to do.
    await release('resource', resources.find((r) => r.id !== held)!.id);
    await hand.all();
    expect((await hand.pass()).steps.topUpWarmMinimum?.actions).toEqual([]);
    resources = await resourcesOf(b.id);
    expect(resources.filter((r) => r.state === 'active')).toHaveLength(2);
    expect(resources.filter((r) => r.state === 'destroyed')).toHaveLength(1);
  });
});
