import type { LeaseRow } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import { NotFoundError } from '../domain/errors.ts';
import { isSettingUp } from '../domain/lifecycle.ts';
import { fetchPage, type Page, type ListPage } from './page.ts';
import { statesMatching } from './stateFilter.ts';

/**
 * True once a new lease is past setting up (the state table's isSettingUp):
 * active, or failed for good. Creating a lease waits for this.
 */
export function leaseSetUp(state: string): boolean {
  return !isSettingUp('lease', state);
}

export type LeaseView = LeaseRow & { readonly blueprint_name: string };

export interface LeaseFilter {
  readonly state?: string;
  readonly blueprintId?: number;
  readonly holder?: string;
}

function leasesWithBlueprint(db: Db) {
  return db
    .selectFrom('leases')
    .innerJoin('blueprints', 'blueprints.id', 'leases.blueprint_id')
    .selectAll('leases')
    .select('blueprints.name as blueprint_name');
}

export async function findLease(db: Db, id: number): Promise<LeaseView> {
  const row = await leasesWithBlueprint(db).where('leases.id', '=', id).executeTakeFirst();
  if (!row) throw new NotFoundError('lease', id);
  return row;
}

export function listLeases(db: Db, filter: LeaseFilter, page: ListPage): Promise<Page<LeaseView>> {
  const query = leasesWithBlueprint(db)
    .$if(filter.state !== undefined, (q) => q.where('leases.state', 'in', statesMatching('lease', filter.state!)))
    .$if(filter.blueprintId !== undefined, (q) => q.where('leases.blueprint_id', '=', filter.blueprintId!))
    .$if(filter.holder !== undefined, (q) => q.where('leases.holder', '=', filter.holder!));
  return fetchPage(query, 'leases.id', page);
}
