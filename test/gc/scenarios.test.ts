import { sql } from 'kysely';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, test } from 'vitest';
import type { BlueprintRow } from '../../migrations/schema.ts';
import { runCollectorPass } from '../../src/gc/runCollector.ts';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { appendCommand } from '../../src/queue/appendCommand.ts';
import { peakLiveResources, stateTrails, trailBreaks } from '../concurrency/support/eventLog.ts';
import { releaseLease, shuffle, tester, waitForQuietQueues } from '../concurrency/support/fixtures.ts';
import { clusterForThisFile } from '../concurrency/support/testCluster.ts';
import { testLog } from '../helpers/testDatabase.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { TEST_GC } from './support/handDrain.ts';

/**
 * The scenarios that broke Drydock in production, each against real worker
 * processes (with random pauses in their drains), the collector running
 * alongside, and checks read back from the event log.
 */
const cluster = clusterForThisFile({ workers: 2, poolSize: 12, env: { SLIPWAY_CHAOS_DRAIN_DELAY_MS: '10' } });
const db = () => cluster.database.db;
const pass = (settings = {}) => runCollectorPass(cluster.database, { ...TEST_GC, ...settings }, 'cli', testLog);

function blueprint(
  name: string,
  limits: { maxResources: number; leasesPerResource?: number; minResources?: number; idleTimeoutMs?: number },
  settings: Record<string, unknown> = {},
) {
  return createBlueprint(db(), { name, driver: 'simulated', leasesPerResource: 1, settings, ...limits }, tester);
}

async function newLeases(b: BlueprintRow, count: number, options: { heartbeatMs?: number } = {}): Promise<number[]> {
  const created = await Promise.all(
    Array.from({ length: count }, (_, i) => createLease(db(), { blueprint: b.name, holder: `h${i}`, ...options }, tester)),
  );
  return created.map((c) => c.lease.id);
}

const leaseStates = (ids: readonly number[]) =>
  db()
    .selectFrom('leases')
    .select(['id', 'state', 'resource_id'])
    .where('id', 'in', [...ids])
    .execute();
const resourcesOf = (b: BlueprintRow) => db().selectFrom('resources').selectAll().where('blueprint_id', '=', b.id).execute();

/** Releases each lease once it is active, as a holder done with it would, until all are destroyed. */
async function serveAndRelease(ids: readonly number[], onRound: () => Promise<void> = async () => undefined): Promise<Set<number>> {
  const released = new Set<number>();
  await waitFor(
    `leases ${ids.join(', ')} to be served and destroyed`,
    async () => {
      await onRound();
      const leases = await leaseStates(ids);
      for (const l of leases.filter((l) => l.state === 'active' && !released.has(l.id))) {
        released.add(l.id);
        await releaseLease(db(), l.id);
      }
      return leases.every((l) => l.state === 'destroyed');
    },
    180_000,
  );
  return released;
}

/** Events of `type` per object, for objects with more than `most`. */
async function moreThan(type: string, key: string, most: number): Promise<Array<{ key: unknown; n: number }>> {
  const { rows } = await sql<{ key: unknown; n: number }>`
    select data->>${key} as key, count(*)::int as n from events where type = ${type} group by 1 having count(*) > ${most}
  `.execute(db());
  return rows;
}

describe('capacity and allocation', () => {
  test('five leases on a blueprint limited to one resource are all served in turn; none stuck, no pending resources pile up', async () => {
    const b = await blueprint('one', { maxResources: 1 }, { latencyMs: { min: 0, max: 30 } });
    const ids = await newLeases(b, 5);
    let peakPending = 0;
    const released = await serveAndRelease(ids, async () => {
      const pending = (await resourcesOf(b)).filter((r) => r.state === 'pending').length;
      peakPending = Math.max(peakPending, pending);
    });
    await waitForQuietQueues(db());
    expect(released.size).toBe(5);
    expect(peakPending).toBeLessThanOrEqual(1);
    // One resource served them all, one after another.
    const resources = await resourcesOf(b);
    expect(resources).toHaveLength(1);
    expect(resources[0]).toMatchObject({ state: 'active', used_slots: 0 });
    const grants = await db()
      .selectFrom('events')
      .select('data')
      .where('target_kind', '=', 'resource')
      .where('target_id', '=', resources[0]!.id)
      .where('type', '=', 'slot_granted')
      .execute();
    expect(grants).toHaveLength(5);
    expect(await db().selectFrom('blueprint_waiters').select('lease_id').where('blueprint_id', '=', b.id).execute()).toEqual([]);
  });

  test('one lease never causes more than one resource allocation, even while a slow allocation is in progress', async () => {
    const b = await blueprint('slow', { maxResources: 3 }, { operationLatencyMs: { allocateResource: 2500 } });
    const ids = await newLeases(b, 6);
    // The collector runs throughout: it must not make matters worse.
    await serveAndRelease(ids, async () => void (await pass()));
    await waitForQuietQueues(db());
    const resources = await resourcesOf(b);
    const perLease = new Map<number, number>();
    for (const r of resources.filter((r) => r.allocated_for_lease_id !== null))
      perLease.set(r.allocated_for_lease_id!, (perLease.get(r.allocated_for_lease_id!) ?? 0) + 1);
    expect([...perLease.values()].every((n) => n === 1)).toBe(true);
    expect(await peakLiveResources(db(), b.id)).toBeLessThanOrEqual(3);
    expect(await moreThan('resource_allocated', 'leaseId', 1)).toEqual([]);
    const { rows } = await sql<{ n: number }>`
      select count(*)::int as n from simulated_effects e join resources r on r.id = e.object_id
      where e.operation = 'allocateResource' and r.blueprint_id = ${b.id}`.execute(db());
    expect(rows[0]!.n).toBe(resources.length);
  });

  test('an allocation that throws yields and is retried, and the lease is served, not failed', async () => {
    const b = await blueprint(
      'flaky',
      { maxResources: 4 },
      { transientFailureRate: 0.9, transientRetryAfterMs: 100, failOperations: ['allocateResource'] },
    );
    const ids = await newLeases(b, 4);
    await waitFor('every lease to be active', async () => (await leaseStates(ids)).every((l) => l.state === 'active'), 180_000);
    const allocates = await db()
      .selectFrom('commands')
      .select(['attempts', 'status'])
      .where('kind', '=', 'allocate')
      .where('target_kind', '=', 'resource')
      .where(
        'target_id',
        'in',
        (await resourcesOf(b)).map((r) => r.id),
      )
      .execute();
    expect(allocates.every((c) => c.status === 'done')).toBe(true);
    expect(allocates.some((c) => c.attempts > 0)).toBe(true);
    await serveAndRelease(ids);
  });

  test('follow-up work is not lost when the step that caused it fails: each broken lease still hands its slot on', async () => {
    const b = await blueprint('breaks', { maxResources: 1 }, { permanentFailureRate: 1, failOperations: ['acquireLease'] });
    const ids = await newLeases(b, 5);
    await waitFor('every lease to break and be destroyed', async () => (await leaseStates(ids)).every((l) => l.state === 'destroyed'), 180_000);
    await waitForQuietQueues(db());
    const trails = await stateTrails(db(), 'lease');
    for (const id of ids) expect(trails.get(id)!.states).toEqual(['pending', 'broken', 'destroyed']);
    const [resource] = await resourcesOf(b);
    expect(resource).toMatchObject({ state: 'active', used_slots: 0 });
    expect(await db().selectFrom('resource_slots').select('lease_id').where('resource_id', '=', resource!.id).execute()).toEqual([]);
    expect(await db().selectFrom('blueprint_waiters').select('lease_id').where('blueprint_id', '=', b.id).execute()).toEqual([]);
  });
});

describe('reclaim and release under concurrent requests', () => {
  test('a lease never lands on a resource that is being reclaimed or released', async () => {
    const b = await blueprint(
      'churn',
      { maxResources: 3, leasesPerResource: 2, minResources: 1, idleTimeoutMs: 1000 },
      { latencyMs: { min: 0, max: 40 } },
    );
    const all: number[] = [];
    for (let round = 0; round < 8; round++) {
      all.push(...(await newLeases(b, 5)));
      const live = (await leaseStates(all)).filter((l) => l.state === 'active');
      const resources = (await resourcesOf(b)).filter((r) => r.state === 'active');
      // Holders releasing, operators reclaiming and releasing resources, and the collector, all at once.
      await Promise.allSettled([
        ...shuffle(live)
          .slice(0, 3)
          .map((l) => releaseLease(db(), l.id)),
        ...resources.map((r) =>
          appendCommand(db(), { target: { kind: 'resource', id: r.id }, kind: round % 3 === 0 ? 'release' : 'reclaim', actor: tester }),
        ),
        pass(),
        pass(),
      ]);
      await sleep(300);
    }
    await serveAndRelease(all, async () => void (await pass()));
    await waitForQuietQueues(db());

    // From each resource's own log: no slot granted once it was released.
    const events = await db()
      .selectFrom('events')
      .select(['target_id', 'type', 'to_state', 'id'])
      .where('target_kind', '=', 'resource')
      .where(
        'target_id',
        'in',
        (await resourcesOf(b)).map((r) => r.id),
      )
      .orderBy('id')
      .execute();
    const releasedAt = new Map<number, number>();
    const late: string[] = [];
    for (const e of events) {
      if (e.type === 'state' && e.to_state === 'released') releasedAt.set(e.target_id, e.id);
      if (e.type === 'slot_granted' && releasedAt.has(e.target_id))
        late.push(`resource ${e.target_id}: slot granted in event ${e.id} after release in ${releasedAt.get(e.target_id)}`);
    }
    expect(late).toEqual([]);
    expect(releasedAt.size).toBeGreaterThan(0);
    // And from each lease's: it was acquired only on a resource that granted it a slot.
    expect(trailBreaks(await stateTrails(db(), 'lease'))).toEqual([]);
    expect(await db().selectFrom('resource_slots').select('lease_id').execute()).toEqual([]);
  });
});

describe('expiry and heartbeats with workers', () => {
  test('leases whose holders stop renewing are released once each by the collector; renewed ones stay', async () => {
    const b = await blueprint('beats', { maxResources: 6 });
    // A deadline of 2 × 3 s: renewals every 300 ms keep a lease well inside
    // it even when a loaded machine's worker applies them a second late.
    const ids = await newLeases(b, 6, { heartbeatMs: 3000 });
    const [kept, dropped] = [ids.slice(0, 3), ids.slice(3)];
    // The holders of `kept` beat from the start, the collector runs alongside, each at its own pace.
    let beating = true;
    const every = async (ms: number, work: () => Promise<unknown>) => {
      while (beating) {
        await work();
        await sleep(ms);
      }
    };
    const loops = Promise.all([
      every(300, () => Promise.all(kept.map((id) => appendCommand(db(), { target: { kind: 'lease', id }, kind: 'renew', actor: tester })))),
      every(100, pass),
    ]);
    try {
      // Destroyed only past their deadline, 6 s after they were made active: by then `kept` would have been too, unrenewed.
      await waitFor('the dropped leases to be destroyed', async () => (await leaseStates(dropped)).every((l) => l.state === 'destroyed'));
      expect((await leaseStates(kept)).every((l) => l.state === 'active')).toBe(true);
    } finally {
      beating = false;
      await loops;
    }
    const trails = await stateTrails(db(), 'lease');
    for (const id of dropped) expect(trails.get(id)!.states).toEqual(['pending', 'acquired', 'active', 'released', 'destroyed']);
    const releases = await db()
      .selectFrom('commands')
      .select(['target_id', 'issued_by', 'source', 'status'])
      .where('kind', '=', 'release')
      .where('target_kind', '=', 'lease')
      .where('target_id', 'in', ids)
      .execute();
    expect(releases.map((r) => r.target_id).sort()).toEqual([...dropped].sort());
    expect(releases.every((r) => r.issued_by === 'system:gc' && r.source === 'gc' && r.status === 'done')).toBe(true);
    for (const id of kept) await releaseLease(db(), id);
    await waitForQuietQueues(db());
  });
});

test("every worker registers the collector on graphile-worker's crontab", async () => {
  const { rows } = await sql<{ identifier: string }>`select identifier from graphile_worker._private_known_crontabs`.execute(db());
  expect(rows.map((r) => r.identifier)).toContain('slipway_gc');
});
