import type { ResourceRow } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import { NotFoundError } from '../domain/errors.ts';
import { fetchPage, type Page, type ListPage } from './page.ts';
import { slotsTaken } from './slotsTaken.ts';
import { statesMatching } from './stateFilter.ts';

/** A resource as lists and pages show it: its slots taken counted (slotsTaken), not its `used_slots` column. */
export type ResourceView = Omit<ResourceRow, 'used_slots'> & {
  readonly slots_taken: number;
  readonly blueprint_name: string;
  readonly blueprint_labels: unknown;
};

/** A resource with the leases holding its slots, and the slots waiting to be cleaned. */
export interface ResourceDetail extends ResourceView {
  readonly slots: ReadonlyArray<{ slot: number; lease_id: number; holder: string; granted_at: Date }>;
  readonly cleaning: readonly number[];
}

export interface ResourceFilter {
  readonly state?: string;
  readonly blueprintId?: number;
}

function resourcesWithBlueprint(db: Db) {
  return db
    .selectFrom('resources')
    .innerJoin('blueprints', 'blueprints.id', 'resources.blueprint_id')
    .selectAll('resources')
    .select([slotsTaken('resources').as('slots_taken'), 'blueprints.name as blueprint_name', 'blueprints.labels as blueprint_labels']);
}

export async function readResourceDetail(db: Db, id: number): Promise<ResourceDetail> {
  const row = await resourcesWithBlueprint(db).where('resources.id', '=', id).executeTakeFirst();
  if (!row) throw new NotFoundError('resource', id);
  // Held and waiting to be cleaned (no lease) in one read.
  const rows = await db
    .selectFrom('resource_slots')
    .leftJoin('leases', 'leases.id', 'resource_slots.lease_id')
    .select(['resource_slots.slot', 'resource_slots.lease_id', 'leases.holder', 'resource_slots.granted_at'])
    .where('resource_slots.resource_id', '=', id)
    .orderBy('resource_slots.slot')
    .execute();
  const slots = rows.flatMap((s) => (s.lease_id === null || s.holder === null ? [] : [{ ...s, lease_id: s.lease_id, holder: s.holder }]));
  return { ...row, slots, cleaning: rows.filter((s) => s.lease_id === null).map((s) => s.slot) };
}

export function listResources(db: Db, filter: ResourceFilter, page: ListPage): Promise<Page<ResourceView>> {
  const query = resourcesWithBlueprint(db)
    .$if(filter.state !== undefined, (q) => q.where('resources.state', 'in', statesMatching('resource', filter.state!)))
    .$if(filter.blueprintId !== undefined, (q) => q.where('resources.blueprint_id', '=', filter.blueprintId!));
  return fetchPage(query, 'resources.id', page);
}
