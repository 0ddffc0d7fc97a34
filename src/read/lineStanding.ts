import { sql } from 'kysely';
import type { BlueprintRow } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import { readMadeForSelector } from '../db/madeForSelector.ts';
import { waitingLeases } from '../db/waitingLeases.ts';
import { type Labels, matches, parseSelector, resourceLabels, type Selector } from '../domain/labels.ts';
import { formatDuration } from '../domain/durations.ts';
import { decayUse } from '../domain/fairShare.ts';
import { canTransition, isSettingUp, LIFECYCLES, statesWith } from '../domain/lifecycle.ts';
import { describeUnmatched, programDecidesLabels, unmatchedMadeFor, whyBlueprintNeverMatches } from '../domain/programLabels.ts';
import type { LineStanding } from './standingText.ts';

/**
 * What a waiting lease's estimate rests on at its blueprint
 * (docs/scheduling.md, "Place in line and an estimate"): how long a slot is
 * held there lately, the slots the lease may have, and the weights of the
 * teams waiting, whose first waiters share the slots as they come free.
 */
export interface Turnover {
  readonly blueprintName: string;
  /**
   * Seconds a slot is held per grant, lately: the teams' decayed slot-time
   * over their decayed grants (src/db/teamUsage.ts), the time from the
   * decision that grants it to the one that hands it on. Undefined when
   * no lease was granted there while others waited.
   */
  readonly meanHoldSeconds: number | undefined;
  /** The weights of the teams with leases in the line. */
  readonly waitingWeights: ReadonlyMap<string, number>;
  /** The slots of its resources that grant them (their own labels over the blueprint's). */
  readonly slots: ReadonlyArray<{ readonly capacity: number; readonly labels: Labels }>;
}

/**
 * The turnover at a blueprint: three reads by its keys (team_usage's rows,
 * the line's teams by an index skip over blueprint_waiters_by_team, its
 * resources that grant slots), however long the line.
 */
export async function readTurnover(db: Db, blueprint: Pick<BlueprintRow, 'id' | 'name' | 'labels' | 'fair_share_half_life_ms'>): Promise<Turnover> {
  const usage = await db
    .selectFrom('team_usage')
    .select(['slot_seconds', 'grants', 'held', sql<number>`(extract(epoch from statement_timestamp() - at) * 1000)::float8`.as('age_ms')])
    .where('blueprint_id', '=', blueprint.id)
    .execute();
  let slotSeconds = 0;
  let grants = 0;
  for (const u of usage) {
    // Brought to now as the next decision would: the slots held as the last one left them, all along.
    const now = decayUse({ slotSeconds: u.slot_seconds, grants: u.grants }, u.age_ms, blueprint.fair_share_half_life_ms, u.held ?? 0);
    slotSeconds += now.slotSeconds;
    grants += now.grants;
  }
  const { rows: waiting } = await sql<{ team: string; weight: number }>`
    with recursive line as (
      (select team from blueprint_waiters where blueprint_id = ${blueprint.id} order by team limit 1)
      union all
      select (select w.team from blueprint_waiters w where w.blueprint_id = ${blueprint.id} and w.team > line.team order by w.team limit 1)
      from line where line.team is not null
    )
    select t.name as team, t.weight from line join teams t on t.name = line.team
  `.execute(db);
  const resources = await db
    .selectFrom('resources')
    .select(['capacity', 'labels'])
    .where('blueprint_id', '=', blueprint.id)
    .where('state', 'in', statesWith('resource', 'grantsSlots'))
    .execute();
  return {
    blueprintName: blueprint.name,
    meanHoldSeconds: grants > 0 ? slotSeconds / grants : undefined,
    waitingWeights: new Map(waiting.map((w) => [w.team, w.weight])),
    slots: resources.map((r) => ({ capacity: r.capacity, labels: resourceLabels(r.labels, blueprint.labels) ?? {} })),
  };
}

/**
 * When a waiting lease of `team`, with `teamAhead` of its team's leases
 * ahead of it in line, may expect to be active, in seconds from now, and
 * what that rests on: each slot it may have (its selector matches) comes
 * free once a mean hold, and its team's first waiter gets its team's part
 * of them, by the weights of the teams waiting. Null, saying why, when
 * there is nothing to go by yet: a time from no data would be a guess.
 */
export function estimateFor(
  turnover: Turnover,
  lease: { readonly team: string; readonly teamAhead: number; readonly selector: Selector | undefined },
): { readonly seconds: number | null; readonly basis: string } {
  const { blueprintName: name, meanHoldSeconds: hold } = turnover;
  if (hold === undefined) return { seconds: null, basis: `no basis yet: no lease was granted at ${name} while others waited` };
  const slots = turnover.slots.reduce((n, s) => n + (lease.selector === undefined || matches(lease.selector, s.labels) ? s.capacity : 0), 0);
  if (slots === 0) return { seconds: null, basis: `no basis yet: no resource of ${name} that grants slots matches it now` };
  const weights = new Map(turnover.waitingWeights);
  if (!weights.has(lease.team)) weights.set(lease.team, 1);
  const total = [...weights.values()].reduce((n, w) => n + w, 0);
  const part = weights.get(lease.team)! / total;
  const teams = weights.size === 1 ? '' : `, of which team ${lease.team}'s part is ${weights.get(lease.team)} of ${total} by weight`;
  return {
    seconds: Math.round(((lease.teamAhead + 1) * hold * 1000) / (slots * part)) / 1000,
    basis: `${lease.teamAhead} of team ${lease.team}'s leases ahead of it; ${slots} slot(s) it may have at ${name}, each held ${formatDuration(hold * 1000)} per lease lately${teams}`,
  };
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
  const line = waitingLeases(db).select(['w.blueprint_id', 'w.lease_id', 'w.since', 'w.team', 'w.why', 'l.created_at', 'l.selector']);
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
            sql<number>`(count(*) filter (where o.team = me.team and (o.since, o.lease_id) < (me.since, me.lease_id)))::int`.as('team_ahead'),
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
      'me.team',
      'b.name',
      'b.fair_share_half_life_ms',
      'b.driver',
      'b.labels',
      'b.possible_labels',
      'counts.ahead',
      'counts.team_ahead',
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
  const turnover = await readTurnover(db, { ...mine, id: mine.blueprint_id });
  const estimate = estimateFor(turnover, {
    team: mine.team,
    teamAhead: mine.team_ahead,
    selector: mine.selector === null ? undefined : parseSelector(mine.selector),
  });
  return {
    blueprintName: mine.name,
    position,
    waiting: mine.waiting,
    since: mine.created_at,
    estimateSeconds: estimate.seconds,
    basis: estimate.basis,
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
