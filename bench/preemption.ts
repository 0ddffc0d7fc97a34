import { sql } from 'kysely';
import { z } from 'zod';
import type { Db } from '../src/db/Database.ts';
import { createBlueprint } from '../src/objects/createBlueprint.ts';
import { createLease } from '../src/objects/createLease.ts';
import { setTeam } from '../src/objects/teams.ts';
import { BENCH_ACTOR } from './fixtures.ts';
import { integer, ms } from './format.ts';
import { openLoop, percentile, pollUntil, runClients } from './measure.ts';
import type { BenchSettings } from './settings.ts';
import type { WorkerFleet } from './WorkerFleet.ts';

/**
 * (k) Preemption (docs/scheduling.md, "Preemption"): on a blueprint whose
 * BENCH_PREEMPTION_ACTIVE slots are all held and BENCH_PREEMPTION_WAITING
 * leases wait, BENCH_PREEMPTION_URGENT urgent leases are created open loop
 * at BENCH_PREEMPTION_RATE a second. Each preempts an active lease, whose
 * holder never releases it: the victim ends at its grace period's end
 * (BENCH_PREEMPTION_GRACE_MS), as `system:preemption`, and its slot goes to
 * the urgent lease.
 *
 * The held and waiting leases have priorities 0–4 and the blueprint's
 * margin is 5, so the line preempts nothing for them; the urgent leases
 * have priority 9. Measured from the database's own times, per urgent
 * lease: its grant beyond its request plus the grace period (the bar), and
 * that time's three parts: the victim chosen (the preemption event) after
 * the request; the victim's release settled after the end it was told of
 * (the workers' timekeepers end it); the grant after that release (the
 * slot's way from the victim to the urgent lease).
 */
export const PreemptionFiguresSchema = z.object({
  count: z.number(),
  graceMs: z.number(),
  /** Grant minus (request + grace): the time beyond the grace period the urgent lease waited. */
  beyondGrace: z.object({ p50Ms: z.number(), p99Ms: z.number(), maxMs: z.number() }),
  /** The victim's release settling minus the end it was told of (the preemption's time plus the grace period). */
  victimEndLate: z.object({ p50Ms: z.number(), p99Ms: z.number(), maxMs: z.number() }),
  /** Grant minus the victim's release settling. */
  afterVictimEnd: z.object({ p50Ms: z.number(), p99Ms: z.number(), maxMs: z.number() }),
  /** The preemption recorded (the victim chosen, its notice queued) minus the request. */
  chosen: z.object({ p50Ms: z.number(), p99Ms: z.number(), maxMs: z.number() }),
  /** Urgent leases whose grant could not be traced to a preemption. */
  untraced: z.number(),
});
export type PreemptionFigures = z.infer<typeof PreemptionFiguresSchema>;

/** The bar: an urgent lease granted within its grace period plus this long (p99). */
export const PREEMPTION_BEYOND_GRACE_MS = 250;

/** The sizes (k) runs at, from the run's settings. */
export type PreemptionSettings = Pick<
  BenchSettings,
  | 'BENCH_CLIENTS'
  | 'BENCH_PREEMPTION_ACTIVE'
  | 'BENCH_PREEMPTION_WAITING'
  | 'BENCH_PREEMPTION_URGENT'
  | 'BENCH_PREEMPTION_RATE'
  | 'BENCH_PREEMPTION_GRACE_MS'
>;

const MARGIN = 5;
const URGENT_PRIORITY = 9;
/** (k)'s blueprint, whose line (l) lengthens and explains. */
export const PREEMPTING_BLUEPRINT = 'preempting';
/** Slots per resource: the pool is as many resources as its active leases need. */
const SLOTS = 100;
const TEAMS = 10;
const teamOf = (i: number) => `preempt-team-${i % TEAMS}`;

/** The `i`th lease of (k) at its blueprint: its team's, at a priority too low to preempt (0–4) unless `priority` is given. */
export const preemptingLease = (db: Db, i: number, priority = i % MARGIN) =>
  createLease(db, { blueprint: PREEMPTING_BLUEPRINT, holder: teamOf(i), team: teamOf(i), priority }, BENCH_ACTOR);
const TIMEOUT_MS = 30 * 60_000;

export async function measurePreemption(
  db: Db,
  workers: WorkerFleet,
  settings: PreemptionSettings,
  progress: (step: string) => void,
): Promise<PreemptionFigures> {
  const active = settings.BENCH_PREEMPTION_ACTIVE;
  const name = PREEMPTING_BLUEPRINT;
  for (let i = 0; i < TEAMS; i++) await setTeam(db, { name: teamOf(i), weight: 1 }, BENCH_ACTOR);
  const blueprint = await createBlueprint(
    db,
    {
      name,
      driver: 'simulated',
      settings: { latencyMs: { min: 0, max: 0 }, recordEffects: false },
      maxResources: Math.ceil(active / SLOTS),
      leasesPerResource: Math.min(SLOTS, active),
      preemption: { priorityMargin: MARGIN, minRuntimeMs: 0, graceMs: settings.BENCH_PREEMPTION_GRACE_MS, protectedPerTeam: 0 },
    },
    BENCH_ACTOR,
  );
  const count = async (state: 'active' | 'waiting') => {
    const { rows } = await (state === 'active'
      ? sql<{ n: number }>`select count(*)::int as n from leases where blueprint_id = ${blueprint.id} and state = 'active'`
      : sql<{ n: number }>`select count(*)::int as n from blueprint_waiters where blueprint_id = ${blueprint.id}`
    ).execute(db);
    return rows[0]!.n;
  };
  progress(`(k) ${integer(active)} active leases (the pool full), then ${integer(settings.BENCH_PREEMPTION_WAITING)} waiting`);
  await runClients(settings.BENCH_CLIENTS, active, (i) => preemptingLease(db, i));
  await workers.whileRunning(pollUntil('the held leases active', async () => (await count('active')) === active, TIMEOUT_MS, 100));
  await runClients(settings.BENCH_CLIENTS, settings.BENCH_PREEMPTION_WAITING, (i) => preemptingLease(db, i));
  const waiting = settings.BENCH_PREEMPTION_WAITING;
  await workers.whileRunning(pollUntil(`${waiting} leases in the line`, async () => (await count('waiting')) === waiting, TIMEOUT_MS, 100));
  await sql`analyze`.execute(db);

  const urgent = settings.BENCH_PREEMPTION_URGENT;
  progress(
    `(k) ${urgent} urgent leases at ${settings.BENCH_PREEMPTION_RATE}/s, each preempting one, grace ${ms(settings.BENCH_PREEMPTION_GRACE_MS)}`,
  );
  const run = await openLoop(urgent, settings.BENCH_PREEMPTION_RATE, async (n) => (await preemptingLease(db, n, URGENT_PRIORITY)).lease.id);
  const urgentIds = run.results;
  const granted = async () => {
    const { rows } = await sql<{
      n: number;
    }>`select count(*)::int as n from leases where id = any(${urgentIds}::bigint[]) and state = 'active'`.execute(db);
    return rows[0]!.n;
  };
  await workers.whileRunning(pollUntil('the urgent leases active', async () => (await granted()) === urgent, TIMEOUT_MS, 100));

  // Each urgent lease's preemption (the blueprint's event), its victim's end and its own grant, by the database's clock.
  const { rows } = await sql<{ chosen: number; beyond_grace: number; victim_end_late: number; after_victim_end: number }>`
    select extract(epoch from p.created_at - u.created_at)::float8 * 1000 as chosen,
           extract(epoch from r.finished_at - (p.data ->> 'endsBy')::timestamptz)::float8 * 1000 as victim_end_late,
           extract(epoch from g.finished_at - u.created_at)::float8 * 1000 - ${settings.BENCH_PREEMPTION_GRACE_MS} as beyond_grace,
           extract(epoch from g.finished_at - r.finished_at)::float8 * 1000 as after_victim_end
    from leases u
    join events p on p.target_kind = 'blueprint' and p.target_id = ${blueprint.id} and p.type = 'preempting'
                 and (p.data ->> 'forLeaseId')::bigint = u.id
    join commands r on r.target_kind = 'lease' and r.target_id = (p.data ->> 'victimLeaseId')::bigint
                   and r.kind = 'release' and r.status = 'done' and r.issued_by = 'system:preemption'
    join commands g on g.target_kind = 'lease' and g.target_id = u.id and g.kind = 'grant' and g.status = 'done'
    where u.id = any(${urgentIds}::bigint[])
  `.execute(db);
  const spread = (samples: number[]) => ({ p50Ms: percentile(samples, 50), p99Ms: percentile(samples, 99), maxMs: percentile(samples, 100) });
  return {
    count: rows.length,
    graceMs: settings.BENCH_PREEMPTION_GRACE_MS,
    beyondGrace: spread(rows.map((r) => r.beyond_grace)),
    victimEndLate: spread(rows.map((r) => r.victim_end_late)),
    afterVictimEnd: spread(rows.map((r) => r.after_victim_end)),
    chosen: spread(rows.map((r) => r.chosen)),
    untraced: urgent - rows.length,
  };
}
