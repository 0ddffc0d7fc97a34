import { sql } from 'kysely';
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

/**
 * Where a lease stands in its blueprint's waiting line: how many pending
 * leases wait ahead of it (the line is served oldest first), and since when
 * it waits; undefined when it is not waiting.
 */
export async function placeInLine(db: Db, leaseId: number): Promise<{ ahead: number; since: Date } | undefined> {
  const { rows } = await sql<{ ahead: number; since: Date }>`
    select w.since,
           (select count(*)::int from blueprint_waiters o join leases l on l.id = o.lease_id
            where o.blueprint_id = w.blueprint_id and l.state = 'pending' and (o.since, o.lease_id) < (w.since, w.lease_id)) as ahead
    from blueprint_waiters w join leases me on me.id = w.lease_id
    where w.lease_id = ${leaseId} and me.state = 'pending'
  `.execute(db);
  return rows[0];
}

export function listLeases(db: Db, filter: LeaseFilter, page: ListPage): Promise<Page<LeaseView>> {
  const query = leasesWithBlueprint(db)
    .$if(filter.state !== undefined, (q) => q.where('leases.state', 'in', statesMatching('lease', filter.state!)))
    .$if(filter.blueprintId !== undefined, (q) => q.where('leases.blueprint_id', '=', filter.blueprintId!))
    .$if(filter.holder !== undefined, (q) => q.where('leases.holder', '=', filter.holder!));
  return fetchPage(query, 'leases.id', page);
}
