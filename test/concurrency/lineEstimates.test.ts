import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import { expect, test } from 'vitest';
import type { LeaseRow } from '../../migrations/schema.ts';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { setTeam } from '../../src/objects/teams.ts';
import { readLineStanding } from '../../src/read/lineStanding.ts';
import { holdAndRelease, keepInLine, tester, waitForQuietQueues } from './support/fixtures.ts';
import { clusterForThisFile } from './support/testCluster.ts';

// A waiting lease's estimate against the wait it then had, in a steady
// stream with two worker processes and random delays in the drain: the
// scheduling's minutes scaled down to tenths of a second.
const cluster = clusterForThisFile({ workers: 2, poolSize: 12, env: { SLIPWAY_CHAOS_DRAIN_DELAY_MS: '10' } });

test("in a steady stream, a waiting lease's estimate is within half of its wait for 4 leases in 5, whatever its team's share", async () => {
  const db = cluster.database.db;
  await setTeam(db, { name: 'north', weight: 2 }, tester);
  await setTeam(db, { name: 'south', weight: 1 }, tester);
  await createBlueprint(
    db,
    {
      name: 'stream',
      driver: 'simulated',
      settings: { latencyMs: { min: 0, max: 5 } },
      maxResources: 4,
      leasesPerResource: 1,
      priorityStepMs: 0,
      fairShareHalfLifeMs: 4000,
    },
    tester,
  );
  const leases: LeaseRow[] = [];
  const started = Date.now();
  // Two seconds to settle (the first leases have nothing to go by), then 12 s measured.
  const measureFrom = started + 2000;
  const measureUntil = measureFrom + 12_000;
  const flooding = () => Date.now() < measureUntil;
  const estimates: Array<{ leaseId: number; team: string; at: number; seconds: number | null; basis: string }> = [];
  // Read as soon as the lease is in line (its blueprint's drain puts it there), as a waiting client would.
  const estimate = async (lease: LeaseRow) => {
    if (Date.now() < measureFrom) return;
    for (let tries = 0; tries < 100; tries++) {
      const at = Date.now();
      const standing = await readLineStanding(db, lease.id);
      if (standing) {
        estimates.push({ leaseId: lease.id, team: lease.team, at, seconds: standing.estimateSeconds, basis: standing.basis });
        return;
      }
      const { state } = await db.selectFrom('leases').select('state').where('id', '=', lease.id).executeTakeFirstOrThrow();
      if (state !== 'pending') return;
      await sleep(5);
    }
  };
  const flooders = Promise.all(['north', 'south'].map((team) => keepInLine(db, 'stream', team, leases, () => !flooding(), estimate)));
  await holdAndRelease(
    db,
    () => leases.map((l) => l.id),
    () => 100 + Math.random() * 100,
    () => !flooding(),
  );
  await flooders;
  await waitForQuietQueues(db);

  const { rows: activations } = await sql<{ lease_id: number; at: Date }>`
    select target_id as lease_id, min(created_at) as at from events
    where target_kind = 'lease' and to_state = 'active' and target_id = any(${estimates.map((e) => e.leaseId)}::bigint[])
    group by target_id
  `.execute(db);
  const activeAt = new Map(activations.map((a) => [a.lease_id, a.at.getTime()]));
  expect(estimates.length).toBeGreaterThanOrEqual(40);
  const judged = estimates.map((e) => {
    const waited = (activeAt.get(e.leaseId)! - e.at) / 1000;
    return { ...e, waited, within: e.seconds !== null && Math.abs(e.seconds / waited - 1) <= 0.5 };
  });
  // The team of half the weight waits about twice as long, and its estimates say so.
  const mean = (team: string, of: (j: (typeof judged)[number]) => number) => {
    const mine = judged.filter((j) => j.team === team);
    return mine.reduce((n, j) => n + of(j), 0) / mine.length;
  };
  const within = judged.filter((j) => j.within).length / judged.length;
  const worst = judged.filter((j) => !j.within).slice(0, 5);
  expect(within, JSON.stringify(worst)).toBeGreaterThanOrEqual(0.8);
  expect(mean('south', (j) => j.seconds ?? 0) / mean('north', (j) => j.seconds ?? 0)).toBeGreaterThan(1.5);
  expect(judged[0]!.basis).toMatch(
    /^\d+ of team (north|south)'s leases ahead of it; 4 slot\(s\) it may have at stream, each held [\d.]+m?s per lease lately, of which team/,
  );
}, 120_000);
