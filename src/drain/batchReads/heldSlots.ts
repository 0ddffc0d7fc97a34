import type { Db } from '../../db/Database.ts';
import type { BatchRead, HandlerContext } from '../Handler.ts';

/**
 * The resource whose slot table names each lease, for every lease of a step
 * at once. Asked of the slot table rather than the lease's resource_id: a
 * lease that broke while taking its slot holds one it never recorded.
 */
export const heldSlot: BatchRead<number, HandlerContext<'lease'>> = {
  key: (ctx) => {
    const lease = ctx.object;
    // A lease released before it ever recorded a slot holds none that needs
    // it (its grants are either applied, and it would have recorded them, or
    // still on their way, and they return their slot themselves).
    return lease.state === 'released' && lease.resource_id === null ? undefined : lease.id;
  },
  async load(db: Db, leaseIds: readonly number[]) {
    const rows = await db
      .selectFrom('resource_slots')
      .select(['lease_id', 'resource_id'])
      .where('lease_id', '=', (eb) => eb.fn.any(eb.val([...leaseIds])))
      .$narrowType<{ lease_id: number }>()
      .execute();
    return new Map(rows.map((r) => [r.lease_id, r.resource_id]));
  },
};
