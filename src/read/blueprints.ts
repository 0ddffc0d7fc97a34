import { sql } from 'kysely';
import type { BlueprintRow } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import { NotFoundError } from '../domain/errors.ts';
import { waitingLeases } from '../db/waitingLeases.ts';
import { liveStates } from '../domain/lifecycle.ts';
import type { SlotRange } from '../domain/slotsPerResource.ts';
import { fetchPage, type Page, type ListPage } from './page.ts';
import { LIVE, statesMatching } from './stateFilter.ts';

/** A blueprint named by its id or its name. */
export type BlueprintRef = number | string;

/** A blueprint as lists give it: with the slots its live resources have. */
export interface ListedBlueprint extends BlueprintRow {
  /** The slots of its live resources, as their driver made them (null: none is live). */
  readonly slotsPerResource: SlotRange | null;
}

/** A blueprint with how many of its resources and leases are in each state. */
export interface BlueprintDetail extends ListedBlueprint {
  readonly resourcesByState: Record<string, number>;
  readonly leasesByState: Record<string, number>;
  /** Leases queued at the blueprint for capacity. */
  readonly waitingLeases: number;
}

export async function findBlueprint(db: Db, ref: BlueprintRef): Promise<BlueprintRow> {
  const row = await db
    .selectFrom('blueprints')
    .selectAll()
    .where(typeof ref === 'number' ? 'id' : 'name', '=', ref)
    .executeTakeFirst();
  if (!row) throw new NotFoundError('blueprint', ref);
  return row;
}

/** The id of the blueprint a list filter names, if it names one; a name that matches nothing is an error, not an empty list. */
export async function blueprintIdFilter(db: Db, ref: BlueprintRef | undefined): Promise<number | undefined> {
  return ref === undefined ? undefined : (await findBlueprint(db, ref)).id;
}

export async function readBlueprintDetail(db: Db, ref: BlueprintRef): Promise<BlueprintDetail> {
  const blueprint = await findBlueprint(db, ref);
  const countByState = async (table: 'resources' | 'leases') => {
    const rows = await db
      .selectFrom(table)
      .select(['state', sql<number>`count(*)::int`.as('n')])
      .where('blueprint_id', '=', blueprint.id)
      .groupBy('state')
      .orderBy('state')
      .execute();
    return Object.fromEntries(rows.map((r) => [r.state, r.n]));
  };
  const waiting = await waitingLeases(db)
    .select(sql<number>`count(*)::int`.as('n'))
    .where('w.blueprint_id', '=', blueprint.id)
    .executeTakeFirstOrThrow();
  return {
    ...blueprint,
    resourcesByState: await countByState('resources'),
    leasesByState: await countByState('leases'),
    waitingLeases: waiting.n,
    slotsPerResource: (await readSlotsPerResource(db, [blueprint.id])).get(blueprint.id) ?? null,
  };
}

/** The fewest and most slots of each blueprint's live resources, as their driver made them; a blueprint with none live is left out. */
async function readSlotsPerResource(db: Db, blueprintIds: readonly number[]): Promise<Map<number, SlotRange>> {
  if (blueprintIds.length === 0) return new Map();
  const rows = await db
    .selectFrom('resources')
    .select(['blueprint_id', sql<number>`min(capacity)::int`.as('min'), sql<number>`max(capacity)::int`.as('max')])
    .where('blueprint_id', 'in', blueprintIds)
    .where('state', 'in', liveStates('resource'))
    .groupBy('blueprint_id')
    .execute();
  return new Map(rows.map((r) => [r.blueprint_id, { min: r.min, max: r.max }]));
}

/**
 * A blueprint's waiting line, in the order it serves it (each lease's place,
 * as waitingLine.ts reads it): the first `limit` leases, each with how many
 * wait ahead of it.
 */
export function readWaitingLine(db: Db, blueprintId: number, limit: number) {
  return waitingLeases(db)
    .select([
      'w.lease_id',
      // Waiting since its request: the row's own since is its place, which a priority moves earlier.
      'l.created_at as since',
      'l.priority',
      'l.holder',
      'w.team',
      'l.selector',
      sql<number>`(row_number() over (order by w.since, w.lease_id) - 1)::int`.as('ahead'),
      sql<number>`(row_number() over (partition by w.team order by w.since, w.lease_id) - 1)::int`.as('team_ahead'),
    ])
    .where('w.blueprint_id', '=', blueprintId)
    .orderBy('w.since')
    .orderBy('w.lease_id')
    .limit(limit)
    .execute();
}

/**
 * Blueprints in the states `filter` lets through (default: live, every
 * state but archived), each with the slots its live resources have (one
 * query for the page).
 */
export async function listBlueprints(db: Db, page: ListPage & { readonly state?: string }): Promise<Page<ListedBlueprint>> {
  const rows = await fetchPage(
    db
      .selectFrom('blueprints')
      .selectAll()
      .where('state', 'in', statesMatching('blueprint', page.state ?? LIVE)),
    'blueprints.id',
    page,
  );
  const slots = await readSlotsPerResource(
    db,
    rows.items.map((b) => b.id),
  );
  return { ...rows, items: rows.items.map((b) => ({ ...b, slotsPerResource: slots.get(b.id) ?? null })) };
}
