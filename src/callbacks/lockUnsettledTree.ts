import { sql } from 'kysely';
import type { Db } from '../db/Database.ts';

/**
 * Share-locks the commands of the tree that have not settled, until the
 * caller commits; returns whether there were any. A drain settling one of
 * them waits for the caller's commit, so its trigger then sees the caller's
 * waiting callback and queues the delivery; and with none left, the tree has
 * settled for good (commands join a tree only when one of its unsettled
 * commands settles), so the caller queues or sends it. Either way exactly
 * one of them does. Used by attachCallback, and by a delivery that finds
 * its tree not settled after all.
 *
 * A lock we waited for may have let a drain commit children we did not see,
 * so the set is read again until two reads agree.
 */
export async function lockUnsettledTree(trx: Db, rootId: number): Promise<boolean> {
  let previous: string | undefined;
  for (;;) {
    const { rows } = await sql<{ id: number }>`
      select id from commands
      where id in (select command_tree_ids(${rootId})) and status in ('queued', 'running')
      order by id
      for share
    `.execute(trx);
    const current = rows.map((row) => row.id).join(',');
    if (current === previous) return rows.length > 0;
    previous = current;
  }
}
