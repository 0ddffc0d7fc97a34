import { sql } from 'kysely';
import type { CommandStatus } from '../migrations/schema.ts';
import type { Db } from '../src/db/Database.ts';

export type StatusCounts = Record<CommandStatus, number>;

/** How many commands are in each status, all objects together. */
export async function commandsByStatus(db: Db): Promise<StatusCounts> {
  const rows = await db
    .selectFrom('commands')
    .select(['status', sql<number>`count(*)::int`.as('n')])
    .groupBy('status')
    .execute();
  const counts: StatusCounts = { queued: 0, running: 0, done: 0, failed: 0, cancelled: 0, coalesced: 0 };
  for (const row of rows) counts[row.status] = row.n;
  return counts;
}

/** True when no object has a command queued or running (cheap: the unsettled index is partial). */
export async function allQueuesEmpty(db: Db): Promise<boolean> {
  const unsettled = await db.selectFrom('commands').select('id').where('status', 'in', ['queued', 'running']).limit(1).executeTakeFirst();
  return unsettled === undefined;
}
