import { sql } from 'kysely';
import type { BlueprintRow } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import { InvalidInputError } from '../domain/errors.ts';
import { formatSelector, type Labels, matches, resourceLabels, type Selector } from '../domain/labels.ts';
import { programDecidesLabels, whyBlueprintNeverMatches } from '../domain/programLabels.ts';
import { statesWith } from '../domain/lifecycle.ts';
import { slotsTaken } from '../read/slotsTaken.ts';
import { waitingLeases } from '../db/waitingLeases.ts';

/**
 * The blueprint a lease that names only a selector goes to
 * (docs/scheduling.md#labels-and-selectors): among the blueprints that take
 * leases and whose resources may match it, the one with the most free slots
 * it matches now; else one whose resources are known to match (declared
 * labels, not a program's answer); then one that may still make a
 * resource; then the one with the fewest leases waiting; then the oldest. Answers it with why, for
 * the lease's `created` event. Refuses (400) a selector no such blueprint can
 * ever match, saying why for each.
 */
export async function chooseBlueprint(db: Db, selector: Selector): Promise<{ id: number; why: string }> {
  const text = formatSelector(selector);
  const { blueprints, never, candidates } = await blueprintsFor(db, selector);
  if (candidates.length === 0) {
    const reasons = never.slice(0, 5).map((n) => `${n.b.name}: ${n.why}`);
    throw new InvalidInputError(
      blueprints.length === 0
        ? `no blueprint takes leases, so nothing can match selector ${text}`
        : `no blueprint that takes leases can ever match selector ${text} (${reasons.join('; ')}${never.length > 5 ? '; …' : ''})`,
      { field: 'selector' },
    );
  }
  const ids = candidates.map((b) => b.id);
  const free = (
    await db
      .selectFrom('resources')
      .select(['blueprint_id', 'labels', sql<number>`capacity - ${slotsTaken('resources')}`.as('free')])
      .where('blueprint_id', 'in', ids)
      .where('state', 'in', statesWith('resource', 'grantsSlots'))
      .execute()
  ).filter((r) => r.free > 0);
  const waiting = await waitingLeases(db)
    .select(['w.blueprint_id', sql<number>`count(*)::int`.as('n')])
    .where('w.blueprint_id', 'in', ids)
    .groupBy('w.blueprint_id')
    .execute();
  const ranked = candidates.map((b) => ({
    b,
    // Known to match a resource it may make (its labels are declared), rather than only not known not to (a program's).
    certain: !programDecidesLabels(b) || selector.every((r) => Object.hasOwn(b.labels as Labels, r.key)),
    free: free.filter((r) => r.blueprint_id === b.id && matches(selector, resourceLabels(r.labels, b.labels))).reduce((n, r) => n + r.free, 0),
    mayMake: b.live_resources < b.max_resources,
    waiting: waiting.find((w) => w.blueprint_id === b.id)?.n ?? 0,
  }));
  ranked.sort(
    (x, y) =>
      y.free - x.free || Number(y.certain) - Number(x.certain) || Number(y.mayMake) - Number(x.mayMake) || x.waiting - y.waiting || x.b.id - y.b.id,
  );
  const best = ranked[0]!;
  const because =
    best.free > 0
      ? `${best.free} free slot(s) it matches`
      : best.mayMake
        ? `room to make a resource (${best.b.live_resources} of ${best.b.max_resources})`
        : `the fewest leases waiting (${best.waiting})`;
  return {
    id: best.b.id,
    why: `selector ${text} may be matched at ${candidates.map((b) => b.name).join(', ')}; went to ${best.b.name}: ${because}`,
  };
}

/**
 * The blueprints a request by `selector` alone may go to (those that take
 * leases and whose resources may match it), with why each of the others can
 * never match: what chooseBlueprint chooses among, and what a dry run
 * (src/drain/explainLease.ts) weighs.
 */
export async function blueprintsFor(
  db: Db,
  selector: Selector,
): Promise<{ blueprints: BlueprintRow[]; never: Array<{ b: BlueprintRow; why: string | undefined }>; candidates: BlueprintRow[] }> {
  const blueprints = await db
    .selectFrom('blueprints')
    .selectAll()
    .where('state', 'in', statesWith('blueprint', 'takesLeases'))
    .orderBy('id')
    .execute();
  const never = blueprints.map((b) => ({ b, why: whyBlueprintNeverMatches(b, selector) }));
  return { blueprints, never, candidates: never.filter((n) => n.why === undefined).map((n) => n.b) };
}
