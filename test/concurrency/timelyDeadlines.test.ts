import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import { expect, test } from 'vitest';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { askFor, tester, waitForLeases } from './support/fixtures.ts';
import { clusterForThisFile } from './support/testCluster.ts';

// No collector schedule: whatever is enforced here, the workers' timekeepers did.
const cluster = clusterForThisFile({ workers: 2, poolSize: 10, env: { SLIPWAY_GC_INTERVAL_MINUTES: '0', SLIPWAY_CHAOS_DRAIN_DELAY_MS: '5' } });

/** Generous: the machine may be slow and shared. The lateness itself is measured by the benchmark. */
const ENFORCED_WITHIN_MS = 90_000;

test('hundreds of leases due in the same second, on two workers (one SIGKILLed as they fall due): each is released once, by the timekeepers, with the reason of its deadline', async () => {
  const db = cluster.database.db;
  const roomy = await createBlueprint(db, { name: 'roomy', driver: 'simulated', maxResources: 4, leasesPerResource: 100 }, tester);
  const full = await createBlueprint(db, { name: 'full', driver: 'simulated', maxResources: 1, leasesPerResource: 1 }, tester);
  const blocker = await createLease(db, { blueprint: full.name, holder: 'blocker' }, tester);
  await waitForLeases(db, [blocker.lease.id], ['active']);

  // Every deadline in the same second, a few seconds from now: expiry times
  // given as that instant, and wait deadlines of leases queued behind the blocker.
  const dueAt = new Date(Math.ceil((Date.now() + 8000) / 1000) * 1000);
  const expiring = await Promise.all(
    Array.from({ length: 250 }, (_, i) => createLease(db, { blueprint: roomy.name, holder: `e${i}`, expiresAt: dueAt.toISOString() }, tester)),
  );
  const waiting = await Promise.all(
    Array.from({ length: 100 }, (_, i) =>
      createLease(db, { blueprint: full.name, holder: `w${i}`, waitTimeoutMs: Math.max(1000, dueAt.getTime() - Date.now() + (i % 10) * 50) }, tester),
    ),
  );
  // Heartbeat leases that stop beating at once: due two intervals after activation.
  const beating = await Promise.all(
    Array.from({ length: 50 }, (_, i) => createLease(db, { blueprint: roomy.name, holder: `h${i}`, heartbeatMs: 3000 }, tester)),
  );
  const expiringIds = expiring.map((l) => l.lease.id);
  const waitingIds = waiting.map((l) => l.lease.id);
  const beatingIds = beating.map((l) => l.lease.id);
  const all = [...expiringIds, ...waitingIds, ...beatingIds];

  // One worker dies just as they fall due; the other carries on alone, and a new one joins.
  await sleep(Math.max(0, dueAt.getTime() - Date.now() - 100));
  const [first] = cluster.workers.running();
  await cluster.workers.kill(first!, 'SIGKILL');
  await cluster.workers.start(1);

  await waitForLeases(db, all, ['destroyed'], ENFORCED_WITHIN_MS);
  const releases = await db
    .selectFrom('commands')
    .select(['target_id', 'issued_by', 'source', 'reason', 'status', 'message'])
    .where('target_kind', '=', 'lease')
    .where('target_id', 'in', all)
    .where('kind', '=', 'release')
    .execute();
  // Exactly one release per lease: none coalesced, none refused, none asked twice.
  expect(releases.map((r) => r.target_id).sort((a, b) => a - b)).toEqual([...all].sort((a, b) => a - b));
  const of = (ids: number[]) => releases.filter((r) => ids.includes(r.target_id));
  for (const r of of(expiringIds)) {
    expect(r).toMatchObject({ issued_by: 'system:gc', source: 'gc', status: 'done' });
    expect(r.reason).toBe(`expired: its expiry time ${dueAt.toISOString().replace('T', ' ')} passed`);
  }
  for (const r of of(waitingIds)) {
    expect(r).toMatchObject({ issued_by: 'system:deadline', source: 'gc', status: 'done' });
    expect(r.reason).toMatch(/^deadline: not active by its wait deadline /);
  }
  for (const r of of(beatingIds)) {
    expect(r).toMatchObject({ issued_by: 'system:gc', source: 'gc', status: 'done' });
    expect(r.reason).toMatch(/^expired: no heartbeat renewal for 2 × 3s \(deadline /);
  }
  // None released before its deadline (the release checks it again when applied).
  const { rows: early } = await sql<{ id: number }>`
    select l.id from leases l join commands c on c.target_kind = 'lease' and c.target_id = l.id and c.kind = 'release'
    where l.id = any(${all}::bigint[]) and c.finished_at < coalesce(l.expires_at, l.heartbeat_deadline, l.wait_deadline)
  `.execute(db);
  expect(early).toEqual([]);
  expect(cluster.workers.errors()).toEqual([]);
});

test('checks every second on many resources, on two workers: each resource is checked again and again, never twice at once; one found gone is replaced without the collector', async () => {
  const db = cluster.database.db;
  const watched = await createBlueprint(
    db,
    { name: 'watched', driver: 'simulated', maxResources: 40, leasesPerResource: 1, minResources: 40, checkIntervalMs: 1000 },
    tester,
  );
  // Made warm by hand: no collector runs here.
  await askFor(db, { kind: 'blueprint', id: watched.id }, 'top_up');
  const active = () =>
    db.selectFrom('resources').select(['id', 'checked_at']).where('blueprint_id', '=', watched.id).where('state', '=', 'active').execute();
  await waitFor('40 warm resources', async () => (await active()).length === 40, ENFORCED_WITHIN_MS);

  // Each resource's checked_at moves on, over and over.
  const seen = new Map<number, Set<number>>();
  await waitFor(
    'every resource checked three times more',
    async () => {
      for (const r of await active()) {
        if (r.checked_at) seen.set(r.id, (seen.get(r.id) ?? new Set()).add(r.checked_at.getTime()));
      }
      return seen.size === 40 && [...seen.values()].every((times) => times.size >= 3);
    },
    ENFORCED_WITHIN_MS,
  );
  const checks = await db
    .selectFrom('commands')
    .select(['issued_by', 'source', 'status', 'reason'])
    .where('target_kind', '=', 'resource')
    .where('kind', '=', 'check')
    .execute();
  // Two timekeepers, never a duplicate: nothing coalesced into a check on its way.
  expect(checks.filter((c) => c.status === 'coalesced')).toEqual([]);
  for (const c of checks) {
    expect(c).toMatchObject({ issued_by: 'system:health', source: 'gc' });
    expect(c.reason).toMatch(/^(last checked \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}Z|never checked); checked every 1s$/);
  }
  // Unchanged checks leave one row per resource, or two while the next is on its way.
  expect(checks.length).toBeLessThanOrEqual(80);

  // One goes: its next check finds it gone, and the blueprint, counting it
  // out, makes a replacement (no collector pass to top it up).
  const [doomed] = await active();
  await askFor(db, { kind: 'blueprint', id: watched.id }, 'update_settings', { settings: { checks: { gone: [doomed!.id] } } });
  await waitFor(
    'the gone resource replaced',
    async () => {
      const rows = await active();
      return rows.length === 40 && !rows.some((r) => r.id === doomed!.id);
    },
    ENFORCED_WITHIN_MS,
  );
  const gone = await db.selectFrom('resources').select(['state', 'health']).where('id', '=', doomed!.id).executeTakeFirstOrThrow();
  expect(gone).toEqual({ state: 'destroyed', health: 'gone' });
  const topUps = await db
    .selectFrom('commands')
    .select(['issued_by', 'reason'])
    .where('target_kind', '=', 'blueprint')
    .where('target_id', '=', watched.id)
    .where('kind', '=', 'top_up')
    .orderBy('id')
    .execute();
  expect(topUps.at(-1)).toEqual({ issued_by: 'system:blueprint', reason: `resource ${doomed!.id} gone: 39 live of a warm minimum of 40` });
  expect(cluster.workers.errors()).toEqual([]);
});
