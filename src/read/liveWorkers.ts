import { sql } from 'kysely';
import type { Db } from '../db/Database.ts';

/** How many workers sent a heartbeat within the last `withinMs`. */
export async function countLiveWorkers(db: Db, withinMs: number): Promise<number> {
  const row = await db
    .selectFrom('workers')
    .select(sql<number>`count(*)::int`.as('n'))
    .where('heartbeat_at', '>', sql<Date>`now() - make_interval(secs => ${withinMs / 1000})`)
    .executeTakeFirstOrThrow();
  return row.n;
}
