import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import { expect, test } from 'vitest';
import type { Db } from '../../src/db/Database.ts';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { cancelReservation, createReservation } from '../../src/objects/reservations.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { releaseLease, tester, waitForLeases, waitForQuietQueues } from './support/fixtures.ts';
import { readHistory, slotsGrantedTwice } from './support/preemptionHistory.ts';
import { clusterForThisFile } from './support/testCluster.ts';

// Reservations (decision 0045) with two worker processes and random delays
// in the drain: one starting while its pool is full of leases that would
// hold their slots for good, and one whose pool is used meanwhile by leases
// its time limit ends before the window (backfill).
const cluster = clusterForThisFile({ workers: 2, poolSize: 12, env: { SLIPWAY_CHAOS_DRAIN_DELAY_MS: '10', SLIPWAY_DUE_POLL_MS: '200' } });

const GRACE_MS = 1500;
/** How long after a deadline the timekeepers and the drains may take to act on it here. */
const SLACK_MS = 2500;
const at = (ms: number) => new Date(Date.now() + ms).toISOString();

/** Slots held at a blueprint now by leases of no reservation, in one snapshot. */
async function heldByOthers(db: Db, blueprintId: number): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    select count(*)::int as n from resource_slots s join resources r on r.id = s.resource_id join leases l on l.id = s.lease_id
    where r.blueprint_id = ${blueprintId} and l.reservation_id is null
  `.execute(db);
  return rows[0]!.n;
}

test('a reservation starting while its pool is full: its slots are reclaimed by its start plus the grace period and held for its leases; nothing is granted twice', async () => {
  const db = cluster.database.db;
  const blueprint = await createBlueprint(
    db,
    { name: 'full', driver: 'simulated', maxResources: 4, leasesPerResource: 1, preemption: { priorityMargin: 9, graceMs: GRACE_MS } },
    tester,
  );
  const holders = await Promise.all(Array.from({ length: 4 }, (_, i) => createLease(db, { blueprint: 'full', holder: `holder-${i}` }, tester)));
  await waitForLeases(
    db,
    holders.map((h) => h.lease.id),
    ['active'],
  );
  const reservation = await createReservation(db, { blueprint: 'full', slots: 2, from: at(2000), to: at(60_000) }, tester);
  // Others keep asking: they wait, and must not get the reclaimed slots.
  const others = await Promise.all(Array.from({ length: 6 }, (_, i) => createLease(db, { blueprint: 'full', holder: `other-${i}` }, tester)));
  const freeBy = reservation.starts_at.getTime() + GRACE_MS + SLACK_MS;
  await sleep(Math.max(0, freeBy - Date.now()));
  // Two of the four were told and ended; the others keep theirs.
  const ended = await db
    .selectFrom('leases')
    .select(['id', 'state', 'ending'])
    .where(
      'id',
      'in',
      holders.map((h) => h.lease.id),
    )
    .execute();
  expect(ended.filter((l) => l.state === 'destroyed')).toHaveLength(2);
  for (let i = 0; i < 10; i++) {
    expect(await heldByOthers(db, blueprint.id)).toBeLessThanOrEqual(2);
    await sleep(100);
  }
  // The reservation's leases are served from the held slots at once, ahead of the six waiting.
  const named = await Promise.all(
    Array.from({ length: 2 }, (_, i) => createLease(db, { blueprint: 'full', holder: `release-${i}`, reservation: reservation.id }, tester)),
  );
  await waitForLeases(
    db,
    named.map((n) => n.lease.id),
    ['active'],
    10_000,
  );
  const stillWaiting = await db
    .selectFrom('leases')
    .select('id')
    .where(
      'id',
      'in',
      others.map((o) => o.lease.id),
    )
    .where('state', '=', 'pending')
    .execute();
  expect(stillWaiting).toHaveLength(6);

  await cancelReservation(db, reservation.id, tester);
  for (const lease of [...holders, ...others, ...named]) await releaseLease(db, lease.lease.id).catch(() => undefined);
  await waitForQuietQueues(db);
  expect(slotsGrantedTwice(await readHistory(db))).toEqual([]);
}, 60_000);

test('before its window, a reservation lends its slots only to leases its time limit ends before the window opens (backfill); at the window they are free', async () => {
  const db = cluster.database.db;
  const holdMs = 1500;
  const blueprint = await createBlueprint(
    db,
    { name: 'lent', driver: 'simulated', maxResources: 2, leasesPerResource: 1, maxHoldMs: holdMs },
    tester,
  );
  const reservation = await createReservation(db, { blueprint: 'lent', slots: 2, from: at(5000), to: at(60_000) }, tester);
  // Leases keep asking until the window opens; each holds its slot until its time limit ends it.
  const asked: number[] = [];
  while (Date.now() < reservation.starts_at.getTime()) {
    asked.push((await createLease(db, { blueprint: 'lent', holder: `job-${asked.length}` }, tester)).lease.id);
    await sleep(300);
  }
  const granted = await db
    .selectFrom('leases')
    .select(['id', 'granted_at', 'end_by'])
    .where('id', 'in', asked)
    .where('granted_at', 'is not', null)
    .execute();
  expect(granted.length).toBeGreaterThan(0);
  for (const lease of granted) expect(lease.end_by!.getTime(), `lease ${lease.id}`).toBeLessThanOrEqual(reservation.starts_at.getTime());
  // The window's leases find both slots free (the last lent ones ended by then), and the line does not get them.
  await waitFor('the lent slots to be given back', async () => (await heldByOthers(db, blueprint.id)) === 0, SLACK_MS + holdMs);
  const named = await Promise.all(
    Array.from({ length: 2 }, (_, i) => createLease(db, { blueprint: 'lent', holder: `window-${i}`, reservation: reservation.id }, tester)),
  );
  await waitForLeases(
    db,
    named.map((n) => n.lease.id),
    ['active'],
    10_000,
  );
  expect(await db.selectFrom('leases').select('id').where('id', 'in', asked).where('granted_at', '>=', reservation.starts_at).execute()).toEqual([]);

  await cancelReservation(db, reservation.id, tester);
  for (const id of [...asked, ...named.map((n) => n.lease.id)]) await releaseLease(db, id).catch(() => undefined);
  await waitForQuietQueues(db);
  expect(slotsGrantedTwice(await readHistory(db))).toEqual([]);
}, 60_000);
