import { expect } from 'vitest';
import type { Db } from '../../../src/db/Database.ts';
import { stateTrails, trailBreaks } from '../../concurrency/support/eventLog.ts';
import { waitFor } from '../../helpers/waitFor.ts';
import type { LeaseStorm } from './LeaseStorm.ts';

/**
 * What a storm must come through a fault with, whatever the fault: clients
 * told 503 with Retry-After and nothing else; every acknowledged command
 * present and settled, none acknowledged twice; the storm's leases exactly
 * those acknowledged, each released once and destroyed; and every lease and
 * resource through its states once per step (nothing applied twice,
 * nothing skipped).
 */
export async function expectStormCameThrough(db: Db, storm: LeaseStorm, blueprintId: number, timeoutMs: number): Promise<void> {
  expect(storm.unexpected).toEqual([]);
  expect(storm.answers.filter((a) => a.status === 503).length, 'the fault never reached a client').toBeGreaterThan(0);

  const acknowledged = storm.acknowledged.map((a) => a.commandId);
  expect(new Set(acknowledged).size, 'a command acknowledged twice').toBe(acknowledged.length);
  await waitFor(
    'every acknowledged command to settle',
    async () => {
      const rows = await db.selectFrom('commands').select(['id', 'status']).where('id', 'in', acknowledged).execute();
      expect(
        rows.map((r) => r.id).sort((a, b) => a - b),
        'acknowledged commands missing',
      ).toEqual([...acknowledged].sort((a, b) => a - b));
      return rows.every((r) => !['queued', 'running'].includes(r.status));
    },
    timeoutMs,
  );

  const made = await db.selectFrom('leases').select('id').where('blueprint_id', '=', blueprintId).execute();
  expect(made.map((l) => l.id).sort((a, b) => a - b)).toEqual([...storm.leases].sort((a, b) => a - b));
  await waitFor(
    'every storm lease to be destroyed',
    async () => {
      const live = await db.selectFrom('leases').select('id').where('blueprint_id', '=', blueprintId).where('state', '!=', 'destroyed').execute();
      return live.length === 0;
    },
    timeoutMs,
  );
  const releases = await db
    .selectFrom('commands')
    .select('target_id')
    .where('target_kind', '=', 'lease')
    .where('target_id', 'in', storm.leases)
    .where('kind', '=', 'release')
    .execute();
  expect(
    releases.map((r) => r.target_id).sort((a, b) => a - b),
    'one release per lease',
  ).toEqual([...storm.leases].sort((a, b) => a - b));
  expect(trailBreaks(await stateTrails(db, 'lease'))).toEqual([]);
  expect(trailBreaks(await stateTrails(db, 'resource'))).toEqual([]);
}
