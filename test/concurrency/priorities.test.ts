import { setTimeout as sleep } from 'node:timers/promises';
import { expect, test } from 'vitest';
import type { LeaseRow } from '../../migrations/schema.ts';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { holdAndRelease, releaseLease, serveOrder, simulatedBlueprint, tester, waitForQuietQueues } from './support/fixtures.ts';
import { clusterForThisFile } from './support/testCluster.ts';

const cluster = clusterForThisFile({ workers: 2, poolSize: 10, env: { SLIPWAY_CHAOS_DRAIN_DELAY_MS: '10' } });

test('slots freed by concurrent releases go to the waiters by priority, then request order', async () => {
  const db = cluster.database.db;
  const blueprint = await simulatedBlueprint(db, 'ordered', { maxResources: 2, leasesPerResource: 2 }, { latencyMs: { min: 0, max: 20 } });
  const holders = await Promise.all(Array.from({ length: 4 }, (_, i) => createLease(db, { blueprint: 'ordered', holder: `holder-${i}` }, tester)));
  const holderIds = holders.map((h) => h.lease.id);
  await waitFor('the holders active', async () => {
    const rows = await db.selectFrom('leases').select('state').where('id', 'in', holderIds).execute();
    return rows.every((r) => r.state === 'active');
  });
  // 24 waiters of mixed priorities, requested within a second or two: a
  // minute's step per level puts every higher priority first.
  const waiters: LeaseRow[] = [];
  for (let i = 0; i < 24; i++) waiters.push((await createLease(db, { blueprint: 'ordered', holder: `w${i}`, priority: (i * 7) % 10 }, tester)).lease);
  const waiterIds = waiters.map((w) => w.id);
  await waitFor('all 24 in the line', async () => {
    const rows = await db.selectFrom('blueprint_waiters').select('lease_id').where('blueprint_id', '=', blueprint.id).execute();
    return rows.length === 24;
  });

  await Promise.all(holderIds.map((id) => releaseLease(db, id)));
  await holdAndRelease(
    db,
    () => waiterIds,
    () => 20,
  );
  await waitForQuietQueues(db);

  const expected = [...waiters]
    .sort((a, b) => b.priority - a.priority || a.created_at.getTime() - b.created_at.getTime() || a.id - b.id)
    .map((w) => w.id);
  expect(await serveOrder(db, waiterIds)).toEqual(expected);
});

test('nothing starves: a priority-0 lease is served while priority-9 leases flood its pool, ahead of those requested 9 steps after it', async () => {
  const db = cluster.database.db;
  const stepMs = 300;
  const settings = { latencyMs: { min: 0, max: 10 } };
  await createBlueprint(
    db,
    { name: 'flooded', driver: 'simulated', settings, maxResources: 1, leasesPerResource: 2, priorityStepMs: stepMs },
    tester,
  );

  // Priority-9 requests at 10 a second for 6 s, against two slots each held
  // 400 ms (5 a second): the line grows the whole time.
  const flood: LeaseRow[] = [];
  let patient: LeaseRow | undefined;
  let flooding = true;
  const flooder = (async () => {
    for (let i = 0; i < 60; i++) {
      flood.push((await createLease(db, { blueprint: 'flooded', holder: `urgent-${i}`, priority: 9 }, tester)).lease);
      if (i === 10) patient = (await createLease(db, { blueprint: 'flooded', holder: 'patient', priority: 0 }, tester)).lease;
      await sleep(100);
    }
    flooding = false;
  })();
  await holdAndRelease(
    db,
    () => [...flood.map((l) => l.id), ...(patient ? [patient.id] : [])],
    () => 400,
    () => !flooding,
    120_000,
  );
  await flooder;
  await waitForQuietQueues(db);

  const order = await serveOrder(db, [...flood.map((l) => l.id), patient!.id]);
  const patientAt = order.indexOf(patient!.id);
  expect(patientAt).toBeGreaterThanOrEqual(0);
  // Requested more than nine steps after the patient lease: served after it.
  const overtaken = flood.filter((l) => l.created_at.getTime() > patient!.created_at.getTime() + 9 * stepMs && order.indexOf(l.id) < patientAt);
  expect(overtaken.map((l) => l.id)).toEqual([]);
  // And the flood did go ahead of it: priority counted.
  expect(flood.filter((l) => l.created_at.getTime() > patient!.created_at.getTime() && order.indexOf(l.id) < patientAt).length).toBeGreaterThan(0);
});
