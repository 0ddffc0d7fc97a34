import { setTimeout as sleep } from 'node:timers/promises';
import { expect, test } from 'vitest';
import { createLease } from '../../src/objects/createLease.ts';
import { runCollectorPass } from '../../src/gc/runCollector.ts';
import { TEST_GC } from '../gc/support/handDrain.ts';
import { testLog } from '../helpers/testDatabase.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { CapacitySampler } from './support/CapacitySampler.ts';
import { peakSlotsUsed, stateTrails, trailBreaks } from './support/eventLog.ts';
import { releaseLease, simulatedBlueprint, tester, waitForQuietQueues } from './support/fixtures.ts';
import { clusterForThisFile } from './support/testCluster.ts';

const cluster = clusterForThisFile({ workers: 2, poolSize: 10, env: { SLIPWAY_CHAOS_DRAIN_DELAY_MS: '10' } });

test('wait deadlines racing grants and releases on a scarce pool: a lease ends by its deadline only if never active, and no slot leaks or is overbooked', async () => {
  const db = cluster.database.db;
  const blueprint = await simulatedBlueprint(db, 'deadlines', { maxResources: 2, leasesPerResource: 2 }, { latencyMs: { min: 0, max: 30 } });
  const sampler = new CapacitySampler(db, blueprint.id);
  // 40 leases for 4 slots, most with a wait deadline of 1–3 s: some are
  // served in time, most are not, and some are granted around their deadline.
  const leases = await Promise.all(
    Array.from({ length: 40 }, (_, i) =>
      createLease(db, { blueprint: blueprint.name, holder: `h${i}`, ...(i % 4 === 3 ? {} : { waitTimeoutMs: 1000 + ((i * 137) % 2000) }) }, tester),
    ),
  );
  const ids = leases.map((l) => l.lease.id);
  const withDeadline = new Set(leases.filter((l) => l.lease.wait_deadline !== null).map((l) => l.lease.id));

  // Holders release what they get after a short hold, while collector passes
  // run every 200 ms (two at once now and then), until every lease has ended
  // or holds its slot with nobody left waiting for a deadline.
  const released = new Set<number>();
  let collecting = true;
  const collector = (async () => {
    for (let n = 0; collecting; n++) {
      const passes = n % 5 === 0 ? 2 : 1;
      await Promise.all(Array.from({ length: passes }, () => runCollectorPass(cluster.database, TEST_GC, 'cli', testLog)));
      await sleep(200);
    }
  })();
  try {
    await waitFor(
      'every lease to be destroyed',
      async () => {
        const rows = await db.selectFrom('leases').select(['id', 'state']).where('id', 'in', ids).execute();
        for (const lease of rows.filter((l) => l.state === 'active' && !released.has(l.id))) {
          released.add(lease.id);
          setTimeout(() => void releaseLease(db, lease.id), Math.random() * 300);
        }
        return rows.every((l) => l.state === 'destroyed');
      },
      120_000,
    );
  } finally {
    collecting = false;
    await collector;
    await sampler.stop();
  }
  await waitForQuietQueues(db);

  const releases = await db
    .selectFrom('commands')
    .select(['id', 'target_id', 'issued_by', 'message', 'coalesced_into'])
    .where('target_kind', '=', 'lease')
    .where('target_id', 'in', ids)
    .where('kind', '=', 'release')
    .execute();
  const trails = await stateTrails(db, 'lease');
  const everActive = (id: number) => trails.get(id)!.states.includes('active');
  const byDeadline = releases.filter((r) => r.issued_by === 'system:deadline' && r.message !== null && r.message.startsWith('released'));
  // A holder's release that joined a deadline's release queued just before
  // makes it unconditional: the lease was active, and its holder asked.
  const joinedByHolder = (id: number) => releases.some((r) => r.coalesced_into === id && r.issued_by === tester.issuedBy);
  // The deadline ended leases (the run is meant to make it), each once, and
  // only ones that had asked for it and were never active.
  expect(byDeadline.length).toBeGreaterThan(0);
  expect(new Set(byDeadline.map((r) => r.target_id)).size).toBe(byDeadline.length);
  expect(byDeadline.filter((r) => !withDeadline.has(r.target_id) || (everActive(r.target_id) && !joinedByHolder(r.id)))).toEqual([]);
  // Every lease ended by its holder's release or its deadline; none without a deadline was released by one.
  for (const id of ids) expect(everActive(id) || byDeadline.some((r) => r.target_id === id)).toBe(true);
  expect(trailBreaks(new Map(ids.map((id) => [id, trails.get(id)!])))).toEqual([]);
  // Capacity: never more than a resource's slots, and all of them back at the end.
  expect(sampler.seen.overbooked).toEqual([]);
  for (const { peak, capacity } of await peakSlotsUsed(db, blueprint.id)) expect(peak).toBeLessThanOrEqual(capacity);
  const used = await db
    .selectFrom('resource_slots as s')
    .innerJoin('resources as r', 'r.id', 's.resource_id')
    .select('s.lease_id')
    .where('r.blueprint_id', '=', blueprint.id)
    .execute();
  expect(used).toEqual([]);
  const waiting = await db
    .selectFrom('blueprint_waiters as w')
    .innerJoin('leases as l', 'l.id', 'w.lease_id')
    .select('l.id')
    .where('l.state', '=', 'pending')
    .execute();
  expect(waiting).toEqual([]);
});
