import { sql } from 'kysely';
import type { Db } from '../db/Database.ts';
import { waitingLeases } from '../db/waitingLeases.ts';

/** How far back the grant rate an estimate rests on looks. */
const RATE_WINDOW_MINUTES = 15;

/**
 * How fast a blueprint has been making leases active lately: from the
 * collector's usage samples (src/gc/sampleUsage.ts) of the last
 * RATE_WINDOW_MINUTES, each of which counts the blueprint's leases made
 * active since the sample before. Two samples at least, so the rate has a
 * span to be a rate over.
 */
export interface GrantRate {
  /** Leases made active per second; 0 when none were, or there were not two samples to measure with. */
  readonly perSecond: number;
  /** How the rate was measured, in words: the basis of every estimate made from it. */
  readonly basis: string;
}

export async function recentGrantRate(db: Db, blueprintId: number, blueprintName: string): Promise<GrantRate> {
  const { rows } = await sql<{ samples: number; span_s: number | null; activated: number }>`
    with recent as (
      select pass_id, sampled_at from usage_samples
      where sampled_at > now() - make_interval(mins => ${RATE_WINDOW_MINUTES})
    )
    select count(*)::int as samples,
           extract(epoch from max(sampled_at) - min(sampled_at))::float8 as span_s,
           -- The first sample's count is of the time before the window's span.
           coalesce((select sum(b.leases_activated) from blueprint_usage_samples b
                     where b.blueprint_id = ${blueprintId}
                       and b.pass_id in (select pass_id from recent) and b.pass_id > (select min(pass_id) from recent)), 0)::int as activated
    from recent
  `.execute(db);
  const { samples, span_s: spanS, activated } = rows[0]!;
  if (samples < 2 || !spanS) return { perSecond: 0, basis: `the collector has not sampled the last ${RATE_WINDOW_MINUTES} min twice` };
  const minutes = Math.max(1, Math.round(spanS / 60));
  return { perSecond: activated / spanS, basis: `${activated} lease(s) made active at ${blueprintName} in the last ${minutes} min` };
}

/** Seconds until a waiter at `position` may expect to be active at `rate`; null when nothing was made active to go by. */
export function estimateFor(position: number, rate: GrantRate): number | null {
  return rate.perSecond > 0 ? Math.ceil(position / rate.perSecond) : null;
}

/** Where a waiting lease stands in its blueprint's line, and when it may expect to be active. */
export interface LineStanding {
  readonly blueprintName: string;
  /** 1: next to be served. */
  readonly position: number;
  /** How many wait at the blueprint, this lease included. */
  readonly waiting: number;
  readonly since: Date;
  /** Seconds from now, from the blueprint's recent grant rate; null when there is no rate to go by. */
  readonly estimateSeconds: number | null;
  /** What the estimate rests on (the recent grant rate), or why there is none. */
  readonly basis: string;
  /** Why it waits, as its blueprint said when it joined the line (null: a worker from before migration 0030 queued it). */
  readonly reason: string | null;
}

/**
 * Where lease `leaseId` stands in its blueprint's waiting line; undefined
 * when it is not waiting. One statement, so one snapshot: read in two, a
 * lease that left the line between them was counted out of its own line
 * (`waiting` 0). Two counts along the line's index (those ahead of its
 * place, and all), not a numbering of the whole line: a waiting client may
 * ask every second.
 */
export async function readLineStanding(db: Db, leaseId: number): Promise<LineStanding | undefined> {
  const line = waitingLeases(db).select(['w.blueprint_id', 'w.lease_id', 'w.since', 'w.why', 'l.created_at']);
  const mine = await db
    .selectFrom(line.as('me'))
    .innerJoin('blueprints as b', 'b.id', 'me.blueprint_id')
    .innerJoinLateral(
      (eb) =>
        eb
          .selectFrom(line.as('o'))
          .whereRef('o.blueprint_id', '=', 'me.blueprint_id')
          .select([
            sql<number>`(count(*) filter (where (o.since, o.lease_id) < (me.since, me.lease_id)))::int`.as('ahead'),
            sql<number>`count(*)::int`.as('waiting'),
          ])
          .as('counts'),
      (join) => join.onTrue(),
    )
    .select(['me.blueprint_id', 'me.created_at', 'me.why', 'b.name', 'counts.ahead', 'counts.waiting'])
    .where('me.lease_id', '=', leaseId)
    .executeTakeFirst();
  if (!mine) return undefined;
  const position = mine.ahead + 1;
  const rate = await recentGrantRate(db, mine.blueprint_id, mine.name);
  return {
    blueprintName: mine.name,
    position,
    waiting: mine.waiting,
    since: mine.created_at,
    estimateSeconds: estimateFor(position, rate),
    basis: rate.basis,
    reason: mine.why,
  };
}
