import { setTimeout as sleep } from 'node:timers/promises';
import { expect, test } from 'vitest';
import type { BlueprintRow } from '../../migrations/schema.ts';
import type { Db } from '../../src/db/Database.ts';
import { CommandRejectedError } from '../../src/domain/errors.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { peakSlotsUsed, stateTrails, trailBreaks } from './support/eventLog.ts';
import { askFor, createLeases, releaseLease, shuffle, simulatedBlueprint, waitForLeases, waitForQuietQueues } from './support/fixtures.ts';
import { clusterForThisFile } from './support/testCluster.ts';

/**
 * Resource health under concurrency: two worker processes with random
 * delays in every step, checks and cleanings racing grants, releases and
 * each other. What must hold is read back from the event log: no slot is
 * granted while it waits to be cleaned, none on a resource that is not
 * active, none after a check found the resource gone, and capacity holds.
 */
const cluster = clusterForThisFile({ workers: 2, poolSize: 12, env: { SLIPWAY_CHAOS_DRAIN_DELAY_MS: '10' } });

const resourcesOf = (db: Db, blueprint: BlueprintRow) =>
  db.selectFrom('resources').select(['id', 'state']).where('blueprint_id', '=', blueprint.id).orderBy('id').execute();

/**
 * Replays each resource's events of a blueprint and lists every grant that
 * broke a rule: a grant of a slot that was not free (held, or given back and
 * not yet cleaned), or on a resource that was not active then.
 */
async function badGrants(db: Db, blueprint: BlueprintRow): Promise<string[]> {
  const events = await db
    .selectFrom('events')
    .innerJoin('resources', 'resources.id', 'events.target_id')
    .select(['events.id', 'events.target_id', 'events.type', 'events.to_state', 'events.message', 'events.data'])
    .where('events.target_kind', '=', 'resource')
    .where('resources.blueprint_id', '=', blueprint.id)
    .where('events.type', 'in', ['created', 'state', 'slot_granted', 'slot_freed', 'slot_cleaned'])
    .orderBy('events.id')
    .execute();
  const state = new Map<number, string>();
  const slots = new Map<string, 'held' | 'dirty'>();
  const bad: string[] = [];
  for (const e of events) {
    const slot = `${e.target_id}:${(e.data as { slot?: number } | null)?.slot}`;
    if (e.type === 'created' || e.type === 'state') state.set(e.target_id, e.to_state!);
    else if (e.type === 'slot_granted') {
      if (slots.has(slot)) bad.push(`event ${e.id}: slot ${slot} granted while ${slots.get(slot)}`);
      if (state.get(e.target_id) !== 'active') bad.push(`event ${e.id}: slot ${slot} granted on a ${state.get(e.target_id)} resource`);
      slots.set(slot, 'held');
    } else if (e.type === 'slot_freed') {
      if (e.message?.endsWith('to be cleaned')) slots.set(slot, 'dirty');
      else slots.delete(slot);
    } else slots.delete(slot);
  }
  return bad;
}

test('a resource found gone while leases come and go: its leases are broken, nothing is granted on it after, and the blueprint replaces it', async () => {
  const db = cluster.database.db;
  const blueprint = await simulatedBlueprint(db, 'vanishing', { maxResources: 2, leasesPerResource: 3 }, { latencyMs: { min: 0, max: 15 } });
  const first = await createLeases(db, blueprint, 6);
  await waitForLeases(
    db,
    first.map((l) => l.id),
    ['active'],
  );
  const [gone, kept] = await resourcesOf(db, blueprint);
  await askFor(db, { kind: 'blueprint', id: blueprint.id }, 'update_settings', {
    settings: { latencyMs: { min: 0, max: 15 }, checks: { gone: [gone!.id] } },
  });
  await waitForQuietQueues(db);

  const holders = await db
    .selectFrom('leases')
    .select(['id', 'resource_id'])
    .where(
      'id',
      'in',
      first.map((l) => l.id),
    )
    .execute();
  const onGone = holders.filter((l) => l.resource_id === gone!.id).map((l) => l.id);
  const onKept = holders.filter((l) => l.resource_id === kept!.id).map((l) => l.id);
  expect(onGone.length).toBeGreaterThan(0);

  // Leases on the other resource released and new ones asked for while both resources are checked, over and over.
  const churn = async () => {
    for (const id of shuffle(onKept)) await releaseLease(db, id);
    return createLeases(db, blueprint, 4);
  };
  const checks = async () => {
    for (let round = 0; round < 5; round++) {
      await Promise.all([askFor(db, { kind: 'resource', id: gone!.id }, 'check'), askFor(db, { kind: 'resource', id: kept!.id }, 'check')]).catch(
        (error) => {
          // A check of a resource already broken or destroyed is refused before it is queued.
          if (!(error instanceof CommandRejectedError)) throw error;
        },
      );
    }
  };
  const [later] = await Promise.all([churn(), checks()]);
  await waitForQuietQueues(db);

  expect((await db.selectFrom('resources').select(['state', 'health']).where('id', '=', gone!.id).executeTakeFirstOrThrow()).state).toBe('destroyed');
  const goneAt = await db
    .selectFrom('events')
    .select('id')
    .where('target_kind', '=', 'resource')
    .where('target_id', '=', gone!.id)
    .where('type', '=', 'health')
    .executeTakeFirstOrThrow();
  const lateGrants = await db
    .selectFrom('events')
    .select('id')
    .where('target_kind', '=', 'resource')
    .where('target_id', '=', gone!.id)
    .where('type', '=', 'slot_granted')
    .where('id', '>', goneAt.id)
    .execute();
  expect(lateGrants).toEqual([]);

  // Every lease that held a slot there when it was found gone was broken, with the reason.
  const told = await db.selectFrom('leases').select(['id', 'state', 'message']).where('message', 'like', `resource ${gone!.id} is gone:%`).execute();
  expect(told.map((l) => l.id)).toEqual(expect.arrayContaining(onGone));
  expect(told.every((l) => l.state === 'destroyed')).toBe(true);
  const trails = await stateTrails(db, 'lease');
  for (const { id } of told) expect(trails.get(id)!.states).toEqual(['pending', 'acquired', 'active', 'broken', 'destroyed']);

  // The leases asked for meanwhile (but those granted on it before the check, told like the rest) are served,
  // on the kept resource or on one made to replace the gone one.
  const toldIds = new Set(told.map((l) => l.id));
  const waiting = later.map((l) => l.id).filter((id) => !toldIds.has(id));
  if (waiting.length > 0) await waitForLeases(db, waiting, ['active']);
  const servedOnGone = await db
    .selectFrom('leases')
    .select('id')
    .where(
      'id',
      'in',
      later.map((l) => l.id),
    )
    .where('resource_id', '=', gone!.id)
    .where('state', '=', 'active')
    .execute();
  expect(servedOnGone).toEqual([]);
  for (const { resourceId, peak, capacity } of await peakSlotsUsed(db, blueprint.id))
    expect(peak, `resource ${resourceId}`).toBeLessThanOrEqual(capacity);
  expect(await badGrants(db, blueprint)).toEqual([]);
  expect(trailBreaks(await stateTrails(db, 'resource'))).toEqual([]);
  expect(cluster.workers.errors()).toEqual([]);
}, 120_000);

test('with cleanings that often fail, no slot is granted before it is cleaned nor on a quarantined resource; repaired, everything is served', async () => {
  const db = cluster.database.db;
  const blueprint = await simulatedBlueprint(db, 'dirty', { maxResources: 3, leasesPerResource: 2 }, { latencyMs: { min: 0, max: 10 } });
  await db.updateTable('blueprints').set({ clean_between_leases: true, clean_attempts: 2 }).where('id', '=', blueprint.id).execute();
  await askFor(db, { kind: 'blueprint', id: blueprint.id }, 'update_settings', {
    settings: { latencyMs: { min: 0, max: 10 }, failOperations: ['cleanSlot'], transientFailureRate: 0.4, transientRetryAfterMs: 50 },
  });
  await waitForQuietQueues(db);

  // Waves of leases, each released once active, with releases racing the cleanings of the wave before.
  // In the last wave every cleaning fails, so whatever chance did before, a resource is quarantined by then.
  const all: number[] = [];
  for (let wave = 0; wave < 4; wave++) {
    if (wave === 3) {
      const { command } = await askFor(db, { kind: 'blueprint', id: blueprint.id }, 'update_settings', {
        settings: { latencyMs: { min: 0, max: 10 }, failOperations: ['cleanSlot'], transientFailureRate: 1, transientRetryAfterMs: 50 },
      });
      await waitFor('the failing settings applied', async () => {
        const { status } = await db.selectFrom('commands').select('status').where('id', '=', command.id).executeTakeFirstOrThrow();
        return status === 'done';
      });
    }
    const leases = (await createLeases(db, blueprint, 6)).map((l) => l.id);
    all.push(...leases);
    await waitFor(
      `wave ${wave}: each lease active or waiting`,
      async () => {
        const rows = await db.selectFrom('leases').select(['id', 'state']).where('id', 'in', leases).execute();
        const active = rows.filter((l) => l.state === 'active').map((l) => l.id);
        for (const id of shuffle(active)) await releaseLease(db, id).catch(() => undefined);
        const quarantined = (await resourcesOf(db, blueprint)).filter((r) => r.state === 'quarantined').length;
        // Quarantined resources hold back the leases waiting for them: those are served after the repair below.
        return rows.every((l) => l.state !== 'active' && l.state !== 'acquired') && (quarantined > 0 || rows.every((l) => l.state === 'destroyed'));
      },
      60_000,
    );
  }
  await waitForQuietQueues(db);
  expect(await badGrants(db, blueprint)).toEqual([]);
  // The faults happened: cleanings failed and were retried, and at least one resource was quarantined for it.
  const quarantines = await db
    .selectFrom('events')
    .innerJoin('resources', 'resources.id', 'events.target_id')
    .select('events.id')
    .where('events.target_kind', '=', 'resource')
    .where('resources.blueprint_id', '=', blueprint.id)
    .where('events.type', '=', 'state')
    .where('events.to_state', '=', 'quarantined')
    .execute();
  expect(quarantines.length).toBeGreaterThan(0);
  const retried = await db
    .selectFrom('events')
    .innerJoin('commands', 'commands.id', 'events.command_id')
    .select('events.id')
    .where('events.type', '=', 'driver_error')
    .where('commands.kind', '=', 'clean_slot')
    .execute();
  expect(retried.length).toBeGreaterThan(0);

  // Cleaning works again: every quarantined resource is repaired, and every lease still waiting is served.
  await askFor(db, { kind: 'blueprint', id: blueprint.id }, 'update_settings', { settings: { latencyMs: { min: 0, max: 10 } } });
  await waitForQuietQueues(db);
  for (const r of (await resourcesOf(db, blueprint)).filter((r) => r.state === 'quarantined'))
    await askFor(db, { kind: 'resource', id: r.id }, 'repair');
  await waitFor('every lease served and released', async () => {
    const rows = await db.selectFrom('leases').select(['id', 'state']).where('id', 'in', all).execute();
    for (const l of rows.filter((l) => l.state === 'active')) await releaseLease(db, l.id).catch(() => undefined);
    return rows.every((l) => l.state === 'destroyed');
  });
  await waitForQuietQueues(db);
  expect(await badGrants(db, blueprint)).toEqual([]);
  for (const { resourceId, peak, capacity } of await peakSlotsUsed(db, blueprint.id))
    expect(peak, `resource ${resourceId}`).toBeLessThanOrEqual(capacity);
  expect((await resourcesOf(db, blueprint)).every((r) => r.state === 'active')).toBe(true);
  expect(cluster.workers.errors()).toEqual([]);
}, 180_000);

test('resources released while their slots are being cleaned are destroyed, with nothing left behind', async () => {
  const db = cluster.database.db;
  const blueprint = await simulatedBlueprint(db, 'scrubbed', { maxResources: 2, leasesPerResource: 3 }, { latencyMs: { min: 0, max: 10 } });
  await db.updateTable('blueprints').set({ clean_between_leases: true, clean_attempts: 5 }).where('id', '=', blueprint.id).execute();
  await askFor(db, { kind: 'blueprint', id: blueprint.id }, 'update_settings', {
    settings: { latencyMs: { min: 0, max: 10 }, operationLatencyMs: { cleanSlot: 150 }, failOperations: ['cleanSlot'], transientFailureRate: 0.3 },
  });
  await waitForQuietQueues(db);
  const leases = (await createLeases(db, blueprint, 6)).map((l) => l.id);
  await waitForLeases(db, leases, ['active']);

  // Half the leases released (their slots go to cleaning), and at once every resource released.
  const resources = await resourcesOf(db, blueprint);
  await Promise.all([
    ...shuffle(leases.slice(0, 3)).map((id) => releaseLease(db, id)),
    ...resources.map((r) => askFor(db, { kind: 'resource', id: r.id }, 'release')),
  ]);
  await waitForQuietQueues(db);

  expect((await resourcesOf(db, blueprint)).map((r) => r.state)).toEqual(resources.map(() => 'destroyed'));
  const left = await db
    .selectFrom('resource_slots')
    .select(['resource_id', 'slot', 'lease_id'])
    .where(
      'resource_id',
      'in',
      resources.map((r) => r.id),
    )
    .execute();
  expect(left).toEqual([]);
  const states = await db.selectFrom('leases').select('state').where('id', 'in', leases).execute();
  expect(states.every((l) => l.state === 'destroyed')).toBe(true);
  expect(await badGrants(db, blueprint)).toEqual([]);
  expect(trailBreaks(await stateTrails(db, 'resource'))).toEqual([]);
  expect(cluster.workers.errors()).toEqual([]);
}, 120_000);

/**
 * An unhealthy or a gone check racing grants on one resource that has free
 * slots all along: leases are asked for in bursts before, while and after
 * the check is applied, and the check's driver call is slow, so acquires
 * the blueprint sends meanwhile queue up behind it and meet its verdict.
 */
test.each([
  ['unhealthy', 'quarantined'],
  ['gone', 'broken'],
] as const)(
  'a check finding the resource %s, racing grants on it while it has free slots: nothing is granted on it after the verdict, no slot is leaked',
  async (verdict, to) => {
    const db = cluster.database.db;
    const latency = { latencyMs: { min: 0, max: 15 }, operationLatencyMs: { checkResource: 300 } };
    const blueprint = await simulatedBlueprint(db, `racing-${verdict}`, { maxResources: 1, leasesPerResource: 12 }, latency);
    const [first] = await createLeases(db, blueprint, 1);
    await waitForLeases(db, [first!.id], ['active']);
    const { resource_id: resourceId } = await db.selectFrom('leases').select('resource_id').where('id', '=', first!.id).executeTakeFirstOrThrow();
    await askFor(db, { kind: 'blueprint', id: blueprint.id }, 'update_settings', { settings: { ...latency, checks: { [verdict]: [resourceId] } } });
    await waitForQuietQueues(db);

    // Bursts of leases, 1 + 10 in all (fewer than the 12 slots), before, while and after the check is applied.
    const racing: number[] = [];
    const ask = async () => {
      for (let burst = 0; burst < 5; burst++) {
        racing.push(...(await createLeases(db, blueprint, 2)).map((l) => l.id));
        await sleep(100);
      }
    };
    const check = async () => {
      await sleep(200 + Math.random() * 100);
      await askFor(db, { kind: 'resource', id: resourceId! }, 'check');
    };
    await Promise.all([ask(), check()]);
    await waitForQuietQueues(db);

    // The verdict applied, and no slot was granted on the resource after it.
    const events = await db
      .selectFrom('events')
      .select(['id', 'type', 'to_state'])
      .where('target_kind', '=', 'resource')
      .where('target_id', '=', resourceId!)
      .orderBy('id')
      .execute();
    const verdictAt = events.find((e) => e.type === 'state' && e.to_state === to)?.id;
    expect(verdictAt, `resource ${resourceId} → ${to}`).toBeDefined();
    expect(events.filter((e) => e.type === 'slot_granted' && e.id > verdictAt!).map((e) => e.id)).toEqual([]);
    expect(await badGrants(db, blueprint)).toEqual([]);
    for (const { resourceId: id, peak, capacity } of await peakSlotsUsed(db, blueprint.id))
      expect(peak, `resource ${id}`).toBeLessThanOrEqual(capacity);
    // The race was run: acquires reached the resource after its verdict and were refused (the lease asks its blueprint again).
    const refused = await db
      .selectFrom('commands')
      .select('id')
      .where('target_kind', '=', 'resource')
      .where('target_id', '=', resourceId!)
      .where('kind', '=', 'acquire')
      .where('message', 'like', 'refused lease % resource is %')
      .execute();
    expect(refused.length).toBeGreaterThan(0);

    // No slot leaked: a resource's slots are exactly those of the leases holding one there, and the count
    // it last wrote is no lower (a lease deletes its own slot row, and tells it only of what may be its last).
    const slotsMatchLeases = async (id: number) => {
      const slots = await db.selectFrom('resource_slots').select('lease_id').where('resource_id', '=', id).orderBy('lease_id').execute();
      const holders = await db
        .selectFrom('leases')
        .select('id')
        .where('resource_id', '=', id)
        .where('state', 'in', ['acquired', 'active'])
        .orderBy('id')
        .execute();
      const { used_slots } = await db.selectFrom('resources').select('used_slots').where('id', '=', id).executeTakeFirstOrThrow();
      expect(
        slots.map((s) => s.lease_id),
        `resource ${id}'s slots`,
      ).toEqual(holders.map((l) => l.id));
      expect(used_slots, `resource ${id}'s used slots`).toBeGreaterThanOrEqual(holders.length);
      return holders.map((l) => l.id);
    };
    const all = [first!.id, ...racing];
    if (verdict === 'unhealthy') {
      const held = await slotsMatchLeases(resourceId!);
      // Those not granted before the verdict wait (the blueprint's one resource is quarantined); repaired, it serves them.
      const states = await db.selectFrom('leases').select(['id', 'state']).where('id', 'in', all).execute();
      expect(states.filter((l) => l.state !== (held.includes(l.id) ? 'active' : 'pending'))).toEqual([]);
      await askFor(db, { kind: 'blueprint', id: blueprint.id }, 'update_settings', { settings: latency });
      await waitForQuietQueues(db);
      await askFor(db, { kind: 'resource', id: resourceId! }, 'repair');
      await waitForLeases(db, all, ['active']);
      expect(await slotsMatchLeases(resourceId!)).toHaveLength(all.length);
    } else {
      // Gone: each lease granted there before the verdict was broken and its slot given back; the others are served on a replacement.
      await waitForLeases(db, all, ['active', 'destroyed']);
      expect(await db.selectFrom('resources').select('state').where('id', '=', resourceId!).executeTakeFirstOrThrow()).toEqual({
        state: 'destroyed',
      });
      expect(await slotsMatchLeases(resourceId!)).toEqual([]);
      const leases = await db.selectFrom('leases').select(['id', 'state', 'resource_id', 'message']).where('id', 'in', all).execute();
      for (const l of leases) {
        if (l.state === 'destroyed')
          expect(l, `lease ${l.id}`).toMatchObject({ resource_id: resourceId, message: expect.stringMatching(`^resource ${resourceId} is gone:`) });
        else expect(l.resource_id, `lease ${l.id}`).not.toBe(resourceId);
      }
      const [replacement] = (await resourcesOf(db, blueprint)).filter((r) => r.id !== resourceId);
      expect(replacement).toBeDefined();
      expect(await slotsMatchLeases(replacement!.id)).toEqual(
        leases
          .filter((l) => l.state === 'active')
          .map((l) => l.id)
          .sort((x, y) => x - y),
      );
    }
    expect(trailBreaks(await stateTrails(db, 'resource'))).toEqual([]);
    expect(cluster.workers.errors()).toEqual([]);
  },
  60_000,
);
