import type { OrphanRow } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';

/** A blueprint's orphans as the collector's last pass recorded them (src/gc/findOrphans.ts), longest known first. */
export async function readOrphans(db: Db, blueprintId: number): Promise<OrphanRow[]> {
  return db.selectFrom('orphans').selectAll().where('blueprint_id', '=', blueprintId).orderBy('first_seen_at').orderBy('external_id').execute();
}
