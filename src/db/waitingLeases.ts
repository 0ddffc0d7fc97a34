import type { Db } from './Database.ts';

/**
 * The leases waiting at blueprints for capacity: waiter rows whose lease is
 * still pending. A lease released while it waits leaves the line at once,
 * but its row stays until the blueprint next serves its line that far (see
 * waitingLine.ts), so every count and every decision reads the line
 * through this (the metrics' gauge spells the same join in its own query).
 */
export function waitingLeases(db: Db) {
  return db.selectFrom('blueprint_waiters as w').innerJoin('leases as l', 'l.id', 'w.lease_id').where('l.state', '=', 'pending');
}

/**
 * Whether any lease waits at the blueprint for capacity (cheaper than
 * counting them), and whether any quota exists at all: the two questions a
 * slot given back asks, in one round trip.
 */
export async function waitersAndQuotas(trx: Db, blueprintId: number): Promise<{ readonly waiters: boolean; readonly quotas: boolean }> {
  return trx
    .selectNoFrom((eb) => [
      eb.exists(waitingLeases(trx).select('w.lease_id').where('w.blueprint_id', '=', blueprintId)).as('waiters'),
      eb.exists(eb.selectFrom('quotas').select('id')).as('quotas'),
    ])
    .$narrowType<{ waiters: boolean; quotas: boolean }>()
    .executeTakeFirstOrThrow();
}
