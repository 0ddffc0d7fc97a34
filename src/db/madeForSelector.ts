import { liveStates } from '../domain/lifecycle.ts';
import type { MadeForSelector } from '../domain/programLabels.ts';
import type { Db } from './Database.ts';

/**
 * The blueprint's resources made for `selector` that may tell a lease
 * requested at `since` what its program makes for it (unmatchedMadeFor):
 * the live ones, and those made since. Along resources_by_selector.
 */
export function readMadeForSelector(db: Db, blueprintId: number, selector: string, since: Date): Promise<MadeForSelector[]> {
  return db
    .selectFrom('resources')
    .select(['id', 'state', 'labels', 'created_at'])
    .where('blueprint_id', '=', blueprintId)
    .where('selector', '=', selector)
    .where((eb) => eb.or([eb('state', 'in', liveStates('resource')), eb('created_at', '>=', since)]))
    .orderBy('id')
    .execute();
}
