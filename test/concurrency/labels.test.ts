import { sql } from 'kysely';
import { expect, test } from 'vitest';
import type { LeaseRow } from '../../migrations/schema.ts';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { matches, parseSelector, resourceLabels } from '../../src/domain/labels.ts';
import { holdAndRelease, tester, waitForQuietQueues } from './support/fixtures.ts';
import { clusterForThisFile } from './support/testCluster.ts';

// Selectors with two worker processes and random delays in the drain:
// leases of three kinds (two selectors, none) come and go on a static pool
// of labelled entries, and no lease is ever granted a slot on a resource
// its selector does not match.
const cluster = clusterForThisFile({ workers: 2, poolSize: 10, env: { SLIPWAY_CHAOS_DRAIN_DELAY_MS: '10' } });

test('no lease is ever granted a slot its selector does not match, while leases of every kind come and go', async () => {
  const db = cluster.database.db;
  const entries = Array.from({ length: 6 }, (_, i) => ({ name: `host-${i}`, slots: 2, labels: { gpu: i % 2 === 0 ? 'a100' : 't4' } }));
  await createBlueprint(db, { name: 'gpus', driver: 'static-pool', maxResources: 6, labels: { os: 'linux' }, settings: { entries } }, tester);
  const selectors = ['gpu=a100', 'gpu=t4, os=linux', undefined];
  const leases: LeaseRow[] = [];
  const requests = Array.from({ length: 60 }, (_, i) => selectors[i % 3]);
  let requesting = true;
  const requester = (async () => {
    for (const selector of requests) {
      leases.push((await createLease(db, { blueprint: 'gpus', holder: 'h', ...(selector ? { selector } : {}) }, tester)).lease);
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 30));
    }
    requesting = false;
  })();
  await holdAndRelease(
    db,
    () => leases.map((l) => l.id),
    () => Math.random() * 150,
    () => !requesting,
    120_000,
  );
  await requester;
  await waitForQuietQueues(db);

  // Every grant, from the commands: the lease's selector against the labels of the resource it got.
  const { rows: grants } = await sql<{ lease_id: number; selector: string | null; labels: unknown; blueprint_labels: unknown }>`
    select c.target_id as lease_id, l.selector, r.labels, b.labels as blueprint_labels
    from commands c join leases l on l.id = c.target_id join resources r on r.id = (c.payload->>'resourceId')::bigint join blueprints b on b.id = r.blueprint_id
    where c.target_kind = 'lease' and c.kind = 'grant' and c.status = 'done'
  `.execute(db);
  expect(new Set(grants.map((g) => g.lease_id)).size).toBe(requests.length);
  const wrong = grants.filter((g) => g.selector !== null && !matches(parseSelector(g.selector), resourceLabels(g.labels, g.blueprint_labels)));
  expect(wrong).toEqual([]);
  // Both kinds of resource served their own kind.
  const byGpu = (gpu: string) => grants.filter((g) => (g.labels as { gpu?: string }).gpu === gpu && g.selector !== null).length;
  expect(byGpu('a100')).toBe(20);
  expect(byGpu('t4')).toBe(20);
  expect(cluster.workers.errors()).toEqual([]);
});
