import { sql } from 'kysely';
import type { BlueprintRow } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import { readMadeForSelector } from '../db/madeForSelector.ts';
import { waitingLeases } from '../db/waitingLeases.ts';
import { matches, parseSelector, resourceLabels } from '../domain/labels.ts';
import { canTransition, isSettingUp, LIFECYCLES, statesWith } from '../domain/lifecycle.ts';
import { describeUnmatched, programDecidesLabels, unmatchedMadeFor, whyBlueprintNeverMatches } from '../domain/programLabels.ts';
import type { LineStanding } from './standingText.ts';

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

/**
 * Where lease `leaseId` stands in its blueprint's waiting line; undefined
 * when it is not waiting. One statement, so one snapshot: read in two, a
 * lease that left the line between them was counted out of its own line
 * (`waiting` 0). Two counts along the line's index (those ahead of its
 * place, and all), not a numbering of the whole line: a waiting client may
 * ask every second.
 */
export async function readLineStanding(db: Db, leaseId: number): Promise<LineStanding | undefined> {
  const line = waitingLeases(db).select(['w.blueprint_id', 'w.lease_id', 'w.since', 'w.why', 'l.created_at', 'l.selector']);
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
    .select([
      'me.blueprint_id',
      'me.created_at',
      'me.why',
      'me.selector',
      'b.name',
      'b.driver',
      'b.labels',
      'b.possible_labels',
      'counts.ahead',
      'counts.waiting',
    ])
    .where('me.lease_id', '=', leaseId)
    .executeTakeFirst();
  if (!mine) return undefined;
  const position = mine.ahead + 1;
  const unservable = mine.selector === null ? null : await whyUnservable(db, mine.blueprint_id, mine.selector, mine.created_at, mine);
  if (unservable !== null) {
    return {
      blueprintName: mine.name,
      position,
      waiting: mine.waiting,
      since: mine.created_at,
      estimateSeconds: null,
      basis: 'no estimate: nothing it was sent to can serve it',
      reason: mine.why,
      unservable,
    };
  }
  const rate = await recentGrantRate(db, mine.blueprint_id, mine.name);
  return {
    blueprintName: mine.name,
    position,
    waiting: mine.waiting,
    since: mine.created_at,
    estimateSeconds: estimateFor(position, rate),
    basis: rate.basis,
    reason: mine.why,
    unservable: null,
  };
}

/** The states in which a resource grants slots, or from which it may go straight to one (still being made: its labels are not known yet; out of service). */
const MAY_GRANT = Object.keys(LIFECYCLES.resource).filter((state) =>
  statesWith('resource', 'grantsSlots').some((granting) => state === granting || canTransition('resource', state, granting)),
);

/**
 * Why no resource of its blueprint can serve a waiting lease's `selector`,
 * requested at `requestedAt`, or null when one may. None can when no
 * resource it has that may grant slots matches (one still being made may),
 * and either none the blueprint may make can match it (its labels, or what
 * its driver may report, changed since the lease was made), or its driver
 * leaves labels to its program and the resources made for this selector
 * came back not matching it, so the blueprint makes no other for this
 * lease (unmatchedMadeFor).
 */
async function whyUnservable(
  db: Db,
  blueprintId: number,
  selectorText: string,
  requestedAt: Date,
  blueprint: Pick<BlueprintRow, 'name' | 'driver' | 'labels' | 'possible_labels'>,
): Promise<string | null> {
  const selector = parseSelector(selectorText);
  const mayServe = await db
    .selectFrom('resources')
    .select(['state', 'labels'])
    .where('blueprint_id', '=', blueprintId)
    .where('state', 'in', MAY_GRANT)
    .execute();
  if (mayServe.some((r) => isSettingUp('resource', r.state) || matches(selector, resourceLabels(r.labels, blueprint.labels)))) return null;
  const never = whyBlueprintNeverMatches(blueprint, selector);
  if (never !== undefined) return `no resource of blueprint ${blueprint.name} can ever match selector ${selectorText}: ${never}`;
  if (!programDecidesLabels(blueprint)) return null;
  const unmatched = unmatchedMadeFor(blueprint, selector, requestedAt, await readMadeForSelector(db, blueprintId, selectorText, requestedAt));
  return unmatched.length === 0 ? null : describeUnmatched(blueprint, selectorText, selector, unmatched);
}
