import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import { expect, test } from 'vitest';
import type { LeaseRow } from '../../migrations/schema.ts';
import type { Db } from '../../src/db/Database.ts';
import { matches, parseSelector, resourceLabels } from '../../src/domain/labels.ts';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { setQuota, setTeam } from '../../src/objects/teams.ts';
import { appendCommand } from '../../src/queue/appendCommand.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { releaseLease, tester, waitForQuietQueues } from './support/fixtures.ts';
import { preemptionTrails, readHistory, slotsGrantedTwice, timelineOf } from './support/preemptionHistory.ts';
import { clusterForThisFile } from './support/testCluster.ts';

// Preemption (decision 0043) with two worker processes and random delays in
// the drain: low-priority leases hold a labelled pool, urgent ones preempt
// them, while holders release (some as soon as they are told, some never),
// renew, urgent leases give up while they wait, and a quota changes. What
// happened is then read back from the history: events, commands, slots.
const cluster = clusterForThisFile({ workers: 2, poolSize: 12, env: { SLIPWAY_CHAOS_DRAIN_DELAY_MS: '10', SLIPWAY_DUE_POLL_MS: '200' } });

const GRACE_MS = 1500;
const random = (min: number, max: number) => min + Math.random() * (max - min);
const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)]!;

/** What a test holder does with its lease. */
interface Plan {
  /** Released this long after it is active, if nothing ends it first. */
  readonly holdMs: number;
  /** Told of its end: released this long after (undefined: it carries on, and its grace period ends it). */
  readonly onNoticeMs?: number;
  /** Renewed while it holds its slot. */
  readonly renews: boolean;
  /** Still waiting this long after its request: it gives up (released before it got a slot). */
  readonly giveUpMs?: number;
}

/** Slots held now by team at the pool, in one snapshot. */
async function heldByTeam(db: Db): Promise<Map<string, number>> {
  const { rows } = await sql<{ team: string; n: number }>`
    select l.team, count(*)::int as n from resource_slots s join leases l on l.id = s.lease_id group by l.team
  `.execute(db);
  return new Map(rows.map((r) => [r.team, r.n]));
}

/**
 * Plays every holder: releases, renewals and giving up, as each lease's
 * plan says, until `until()` and every lease is destroyed.
 */
async function playHolders(db: Db, leases: ReadonlyMap<number, Plan>, until: () => boolean): Promise<void> {
  const seen = new Map<number, { activeAt?: number; toldAt?: number; lastRenew?: number; released?: boolean }>();
  const requestedAt = new Map<number, number>();
  await waitFor(
    'every lease served or given up, and destroyed',
    async () => {
      const ids = [...leases.keys()];
      const rows = ids.length === 0 ? [] : await db.selectFrom('leases').select(['id', 'state', 'ending']).where('id', 'in', ids).execute();
      const now = Date.now();
      for (const lease of rows) {
        const plan = leases.get(lease.id)!;
        const s = seen.get(lease.id) ?? {};
        seen.set(lease.id, s);
        if (!requestedAt.has(lease.id)) requestedAt.set(lease.id, now);
        if (s.released || lease.state === 'destroyed') continue;
        const release = () => {
          s.released = true;
          void releaseLease(db, lease.id);
        };
        if (lease.state === 'pending' && plan.giveUpMs !== undefined && now - requestedAt.get(lease.id)! > plan.giveUpMs) release();
        if (lease.state !== 'active') continue;
        s.activeAt ??= now;
        if (lease.ending !== null) s.toldAt ??= now;
        if (now - s.activeAt > plan.holdMs) release();
        else if (s.toldAt !== undefined && plan.onNoticeMs !== undefined && now - s.toldAt > plan.onNoticeMs) release();
        else if (plan.renews && now - (s.lastRenew ?? s.activeAt) > 300) {
          s.lastRenew = now;
          // A renewal racing the lease's end is refused: that is the race played here.
          void appendCommand(db, { target: { kind: 'lease', id: lease.id }, kind: 'renew', payload: { expiresInMs: 30_000 }, actor: tester }).catch(
            () => undefined,
          );
        }
      }
      return until() && rows.length === ids.length && rows.every((l) => l.state === 'destroyed');
    },
    120_000,
  );
}

/**
 * A coda to the random part, which plays each ending only as chance has it:
 * each played once for certain, under the same workers and delays. Eight
 * low leases of one team fill the pool, granted one after another, so the
 * victims are taken from the last granted back (the shortest run first).
 * Three urgent leases then preempt one each, in turn: the first's victim
 * carries on until its grace period ends it; the second's is released by
 * its holder when told; the third gives up once its preemption is recorded,
 * which withdraws it. The history checks read this part with the rest.
 */
async function playEachEnding(db: Db, ask: (input: Parameters<typeof createLease>[1], plan: Plan) => Promise<number>): Promise<void> {
  const plans = new Map<number, Plan>();
  let asked = false;
  const playing = playHolders(db, plans, () => asked);
  const request = async (priority: number, plan: Plan) => {
    const id = await ask({ blueprint: 'contested', holder: 'alpha-coda', team: 'alpha', priority }, plan);
    plans.set(id, plan);
    return id;
  };
  const stateOf = async (id: number) => (await db.selectFrom('leases').select('state').where('id', '=', id).executeTakeFirstOrThrow()).state;
  const preempting = async (id: number) =>
    (await db.selectFrom('preemptions').select('victim_lease_id').where('for_lease_id', '=', id).executeTakeFirst()) !== undefined;
  // Granted in this order and taken in the reverse: the withdrawn one's victim, the holder's, the grace period's.
  const victims: Plan[] = [
    { holdMs: 8000, renews: true },
    { holdMs: 20_000, onNoticeMs: 0, renews: false },
    { holdMs: 20_000, renews: true },
  ];
  for (const plan of [...Array.from({ length: 5 }, (): Plan => ({ holdMs: 10_000, renews: false })), ...victims]) {
    const id = await request(0, plan);
    await waitFor('the low lease active', async () => (await stateOf(id)) === 'active');
  }
  // Past the minimum runtime of the last granted.
  await sleep(500);
  for (const last of [false, false, true]) {
    // Each holds its slot past the others' grace periods: a slot freed meanwhile would go to one still waiting, withdrawing its preemption.
    const id = await request(9, { holdMs: 8000, renews: false });
    await waitFor('the urgent lease preempting', () => preempting(id));
    if (last) await releaseLease(db, id);
  }
  asked = true;
  await playing;
}

test('preemptions under concurrent releases, renewals, quota changes and urgent leases: no slot granted twice, no victim ended early, every preemption ends in its grant or its withdrawal', async () => {
  const db = cluster.database.db;
  for (const name of ['alpha', 'beta', 'gamma']) await setTeam(db, { name }, tester);
  const entries = Array.from({ length: 4 }, (_, i) => ({ name: `host-${i}`, slots: 2, labels: { gpu: i % 2 === 0 ? 'a100' : 't4' } }));
  const preemption = { priorityMargin: 3, minRuntimeMs: 300, graceMs: GRACE_MS };
  await createBlueprint(db, { name: 'contested', driver: 'static-pool', maxResources: 4, settings: { entries }, preemption }, tester);
  await setQuota(db, { team: 'gamma', blueprint: 'contested', maxLeases: 2 }, tester);
  await setQuota(db, { team: 'beta', maxLeases: 4 }, tester);

  const plans = new Map<number, Plan>();
  const created: LeaseRow[] = [];
  const ask = async (input: Parameters<typeof createLease>[1], plan: Plan) => {
    const { lease } = await createLease(db, input, tester);
    created.push(lease);
    plans.set(lease.id, plan);
    return lease.id;
  };
  const started = Date.now();
  const requesting = () => Date.now() - started < 20_000;
  let raisedAt = Number.POSITIVE_INFINITY;
  let quotaChanges = 0;
  const heldSamples: Array<{ until: number; held: Map<string, number> }> = [];

  // Low priorities (0 to 2) keep the pool of 8 slots full: some holders
  // release when told, some carry on until their grace period ends.
  const fillers = (async () => {
    while (requesting()) {
      const live = await db
        .selectFrom('leases')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('priority', '<', 3)
        .where('state', '!=', 'destroyed')
        .executeTakeFirstOrThrow();
      if (Number(live.n) < 10) {
        const team = pick(['alpha', 'beta']);
        await ask(
          { blueprint: 'contested', holder: `${team}-low`, team, priority: Math.floor(random(0, 3)) },
          Math.random() < 0.5
            ? { holdMs: random(4000, 10_000), onNoticeMs: random(0, GRACE_MS * 0.6), renews: Math.random() < 0.5 }
            : { holdMs: random(6000, 12_000), renews: Math.random() < 0.5 },
        );
      } else await sleep(random(10, 60));
    }
  })();
  // Urgent leases (5 to 9), some wanting an a100, some giving up while they wait.
  const urgents = (async () => {
    while (requesting()) {
      const team = pick(['gamma', 'gamma', 'alpha', 'beta']);
      await ask(
        {
          blueprint: 'contested',
          holder: `${team}-urgent`,
          team,
          priority: Math.floor(random(5, 10)),
          ...(Math.random() < 0.3 ? { selector: 'gpu=a100' } : {}),
        },
        { holdMs: random(500, 2000), renews: Math.random() < 0.3, ...(Math.random() < 0.3 ? { giveUpMs: random(100, 2 * GRACE_MS) } : {}) },
      );
      await sleep(random(300, 900));
    }
  })();
  // gamma's quota at the pool: 2, raised to 3, then lowered to 1 (a lower quota ends no lease).
  const quotas = (async () => {
    await sleep(7000);
    raisedAt = Date.now();
    await setQuota(db, { team: 'gamma', blueprint: 'contested', maxLeases: 3 }, tester);
    quotaChanges++;
    await sleep(7000);
    await setQuota(db, { team: 'gamma', blueprint: 'contested', maxLeases: 1 }, tester);
    quotaChanges++;
  })();
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const held = await heldByTeam(db);
      heldSamples.push({ until: Date.now(), held });
      await sleep(20);
    }
  })();

  await playHolders(db, plans, () => !requesting());
  await Promise.all([fillers, urgents, quotas]);
  await playEachEnding(db, ask);
  await waitForQuietQueues(db);
  sampling = false;
  await sampler;
  expect(quotaChanges).toBe(2);

  const events = await readHistory(db);
  // No slot granted twice.
  expect(slotsGrantedTwice(events)).toEqual([]);

  const { trails, breaks } = preemptionTrails(events);
  expect(breaks).toEqual([]);
  const released = new Map(
    events.filter((e) => e.target_kind === 'lease' && e.type === 'state' && e.to_state === 'released').map((e) => [e.target_id, e]),
  );
  const granted = events.filter((e) => e.target_kind === 'resource' && e.type === 'slot_granted');
  const freed = events.filter((e) => e.target_kind === 'resource' && e.type === 'slot_freed');
  const acquires = await db
    .selectFrom('commands')
    .select(['target_id', 'reason', 'payload'])
    .where('target_kind', '=', 'resource')
    .where('kind', '=', 'acquire')
    .execute();
  const wrong: string[] = [];
  for (const t of trails) {
    const end = released.get(t.victim);
    if (t.withdrawnAt !== undefined) continue;
    // One not withdrawn: its victim ended, and the slot went to the lease it was for, as the preemption's.
    if (!end) {
      wrong.push(`lease ${t.victim}, preempted for ${t.forLease}, never ended`);
      continue;
    }
    const victimFreed = freed.find((e) => e.target_id === t.resourceId && (e.data as { leaseId: number }).leaseId === t.victim);
    const forGranted = granted.find((e) => e.target_id === t.resourceId && (e.data as { leaseId: number }).leaseId === t.forLease);
    if (!victimFreed || !forGranted || forGranted.id < victimFreed.id) {
      const elsewhere = granted.find((e) => (e.data as { leaseId: number }).leaseId === t.forLease);
      wrong.push(
        `lease ${t.victim}'s slot on resource ${t.resourceId} did not go to lease ${t.forLease}, which it was preempted for (${elsewhere ? `granted on resource ${elsewhere.target_id}` : `never granted; released by ${released.get(t.forLease)?.actor}`})`,
      );
      continue;
    }
    const sent = acquires.filter((c) => c.target_id === t.resourceId && (c.payload as { leaseId: number }).leaseId === t.forLease);
    if (!sent.some((c) => c.reason?.includes(`the slot of lease ${t.victim}`)))
      wrong.push(
        `lease ${t.forLease} was sent to resource ${t.resourceId} by the line, not as lease ${t.victim}'s slot: ${sent.map((c) => c.reason).join('; ')}`,
      );
  }
  // Ended by a preemption only where one stood, and not before the end its holder was told.
  for (const [leaseId, end] of released) {
    if (end.actor !== 'system:preemption') continue;
    if (!trails.some((t) => t.victim === leaseId)) wrong.push(`lease ${leaseId} ended by a preemption it never had`);
    const told = events.filter((e) => e.target_kind === 'lease' && e.target_id === leaseId && e.id < end.id && e.type.startsWith('ending')).at(-1);
    if (told?.type !== 'ending') wrong.push(`lease ${leaseId} ended by a preemption with no end standing (${told?.type ?? 'never told'})`);
    else if (end.created_at.getTime() < Date.parse((told.data as { at: string }).at))
      wrong.push(`lease ${leaseId} ended by its preemption at ${end.created_at.toISOString()}, before ${(told.data as { at: string }).at}`);
  }
  const involved = [...new Set(wrong.flatMap((w) => [...w.matchAll(/lease (\d+)/g)].map((m) => Number(m[1]))))];
  expect(wrong, involved.length > 0 ? await timelineOf(db, involved.slice(0, 4)) : undefined).toEqual([]);

  // Quotas held: gamma's at the pool (2, then 3; lowering it ends no lease), beta's overall.
  for (const { until, held } of heldSamples) {
    expect(held.get('gamma') ?? 0).toBeLessThanOrEqual(until < raisedAt ? 2 : 3);
    expect(held.get('beta') ?? 0).toBeLessThanOrEqual(4);
  }
  // Selectors held: every grant's lease matches its resource's labels.
  const { rows: grants } = await sql<{ selector: string | null; labels: unknown }>`
    select l.selector, r.labels from commands c join leases l on l.id = c.target_id join resources r on r.id = (c.payload->>'resourceId')::bigint
    where c.target_kind = 'lease' and c.kind = 'grant' and c.status = 'done'
  `.execute(db);
  expect(grants.filter((g) => g.selector !== null && !matches(parseSelector(g.selector), resourceLabels(g.labels, {})))).toEqual([]);

  // Nothing left under way; and the run played every ending: by a holder told, by the grace period, and withdrawn.
  expect(await db.selectFrom('preemptions').selectAll().execute()).toEqual([]);
  const outcomes = { byGrace: 0, byHolder: 0, withdrawn: 0, other: 0 };
  for (const t of trails) {
    const actor = released.get(t.victim)?.actor;
    if (t.withdrawnAt !== undefined) outcomes.withdrawn++;
    else if (actor === 'system:preemption') outcomes.byGrace++;
    else if (actor === tester.issuedBy) outcomes.byHolder++;
    else outcomes.other++;
  }
  expect(outcomes.byGrace, JSON.stringify(outcomes)).toBeGreaterThan(0);
  expect(outcomes.byHolder, JSON.stringify(outcomes)).toBeGreaterThan(0);
  expect(outcomes.withdrawn, JSON.stringify(outcomes)).toBeGreaterThan(0);
  expect(cluster.workers.errors()).toEqual([]);
}, 180_000);
