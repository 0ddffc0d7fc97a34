import { sql } from 'kysely';
import type { BlueprintRow, CommandRow } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import { liveStates } from '../domain/lifecycle.ts';
import { waitingLeases } from '../db/waitingLeases.ts';

/** One blueprint on the overview: how many of its resources and leases are in each state, and how many leases wait. */
export interface BlueprintSummary extends BlueprintRow {
  readonly resourcesByState: Record<string, number>;
  readonly leasesByState: Record<string, number>;
  readonly waitingLeases: number;
}

/** Everything at a glance: every blueprint's counts, and the work queued or running now. */
export interface Overview {
  readonly blueprints: BlueprintSummary[];
  /** How many commands are queued and how many running, everywhere. */
  readonly inFlight: Record<'queued' | 'running', number>;
  /** The oldest of those commands (the ones most likely stuck), at most `IN_FLIGHT_SHOWN`. */
  readonly oldestInFlight: CommandRow[];
}

const IN_FLIGHT_SHOWN = 20;

/**
 * One grouped count per table for all blueprints (not a query per
 * blueprint), each answered from the (blueprint_id, state) indexes.
 */
export async function readOverview(db: Db): Promise<Overview> {
  // Archived blueprints are history: their pages stay, the overview is for what is live.
  const blueprints = await db.selectFrom('blueprints').selectAll().where('state', 'in', liveStates('blueprint')).orderBy('name').execute();
  const countsOf = async (table: 'resources' | 'leases') => {
    const rows = await db
      .selectFrom(table)
      .select(['blueprint_id', 'state', sql<number>`count(*)::int`.as('n')])
      .groupBy(['blueprint_id', 'state'])
      .execute();
    const byBlueprint = new Map<number, Record<string, number>>();
    for (const row of rows) byBlueprint.set(row.blueprint_id, { ...byBlueprint.get(row.blueprint_id), [row.state]: row.n });
    return byBlueprint;
  };
  const resources = await countsOf('resources');
  const leases = await countsOf('leases');
  const waiting = await waitingLeases(db)
    .select(['w.blueprint_id', sql<number>`count(*)::int`.as('n')])
    .groupBy('w.blueprint_id')
    .execute();
  const waitingBy = new Map(waiting.map((row) => [row.blueprint_id, row.n]));
  const unsettled = await db
    .selectFrom('commands')
    .select(['status', sql<number>`count(*)::int`.as('n')])
    .where('status', 'in', ['queued', 'running'])
    .groupBy('status')
    .execute();
  const oldestInFlight = await db
    .selectFrom('commands')
    .selectAll()
    .where('status', 'in', ['queued', 'running'])
    .orderBy('not_before')
    .limit(IN_FLIGHT_SHOWN)
    .execute();
  return {
    blueprints: blueprints.map((blueprint) => ({
      ...blueprint,
      resourcesByState: resources.get(blueprint.id) ?? {},
      leasesByState: leases.get(blueprint.id) ?? {},
      waitingLeases: waitingBy.get(blueprint.id) ?? 0,
    })),
    inFlight: { queued: 0, running: 0, ...Object.fromEntries(unsettled.map((row) => [row.status, row.n])) },
    oldestInFlight,
  };
}
