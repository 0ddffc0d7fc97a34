import { sql } from 'kysely';
import { z } from 'zod';
import type { Db } from '../src/db/Database.ts';
import type { CallerMaker } from './apiCallers.ts';
import { integer } from './format.ts';
import { oneAtATime, percentile, pollUntil, runClients } from './measure.ts';
import { PREEMPTING_BLUEPRINT, preemptingLease } from './preemption.ts';
import type { BenchSettings } from './settings.ts';
import type { WorkerFleet } from './WorkerFleet.ts';

/**
 * (l) Explanations (docs/scheduling.md, "Why is my lease waiting?"): (k)'s
 * preempting blueprint, its pool still full, its line lengthened to
 * BENCH_EXPLAIN_WAITING leases (priorities 0–4, below its margin over the
 * active leases, so each explanation finds the priority that would preempt
 * for it: the dearest kind of explanation).
 * Then BENCH_EXPLAIN_COUNT leases drawn across the line are explained one
 * at a time through `GET /v1/leases/{id}/explanation`, each timed from the
 * request to its answer, as `slipway lease explain` meets it.
 */
export const ExplanationFiguresSchema = z.object({
  waiting: z.number(),
  count: z.number(),
  p50Ms: z.number(),
  p99Ms: z.number(),
  maxMs: z.number(),
  /** Explanations that named a priority which would preempt for the lease. */
  preemptingPriority: z.number(),
});
export type ExplanationFigures = z.infer<typeof ExplanationFiguresSchema>;

/** The bar: an explanation answered within this long (p99), with the line at BENCH_EXPLAIN_WAITING. */
export const EXPLAIN_P99_MS = 100;

export type ExplanationSettings = Pick<BenchSettings, 'BENCH_CLIENTS' | 'BENCH_EXPLAIN_WAITING' | 'BENCH_EXPLAIN_COUNT'>;

const TIMEOUT_MS = 30 * 60_000;

interface ExplanationAnswer {
  readonly blueprints: Array<{ readonly reasons: Array<{ readonly kind: string; readonly change: string | null }> }>;
}

export async function measureExplanations(
  db: Db,
  workers: WorkerFleet,
  api: CallerMaker,
  settings: ExplanationSettings,
  progress: (step: string) => void,
): Promise<ExplanationFigures> {
  const blueprint = await db.selectFrom('blueprints').select('id').where('name', '=', PREEMPTING_BLUEPRINT).executeTakeFirstOrThrow();
  const waiting = async () => {
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from blueprint_waiters where blueprint_id = ${blueprint.id}`.execute(db);
    return rows[0]!.n;
  };
  const target = settings.BENCH_EXPLAIN_WAITING;
  const more = Math.max(0, target - (await waiting()));
  progress(`(l) ${integer(more)} more leases waiting at ${PREEMPTING_BLUEPRINT}, ${integer(target)} in its line`);
  // Numbered past (k)'s, for teams and priorities spread alike.
  await runClients(settings.BENCH_CLIENTS, more, (i) => preemptingLease(db, 1_000_000 + i));
  await workers.whileRunning(pollUntil(`${target} leases in the line`, async () => (await waiting()) >= target, TIMEOUT_MS, 100));
  await sql`analyze`.execute(db);

  const count = settings.BENCH_EXPLAIN_COUNT;
  const { rows: sample } = await sql<{ lease_id: number }>`
    select lease_id from blueprint_waiters where blueprint_id = ${blueprint.id} order by random() limit ${count}
  `.execute(db);
  progress(`(l) ${sample.length} explanations, one at a time, through the API`);
  const caller = api.caller(1);
  let preemptingPriority = 0;
  const durations = await oneAtATime(sample.length, 0, async (n) => {
    const answer = await caller.request<ExplanationAnswer>('GET', `/v1/leases/${sample[n]!.lease_id}/explanation`);
    if (answer.status !== 200) throw new Error(`explanation of lease ${sample[n]!.lease_id}: ${answer.status} ${JSON.stringify(answer.body)}`);
    const reasons = answer.body.blueprints.flatMap((b) => b.reasons);
    if (reasons.some((r) => r.kind === 'priority' && r.change?.includes('would preempt'))) preemptingPriority++;
  });
  return {
    waiting: await waiting(),
    count: durations.length,
    p50Ms: percentile(durations, 50),
    p99Ms: percentile(durations, 99),
    maxMs: percentile(durations, 100),
    preemptingPriority,
  };
}
