import { z } from 'zod';
import { command, transaction } from './peerCommand.ts';
import { PEER_SCHEMA } from './peerSchema.ts';
import { POOL_LINE_LOCK } from './poolLineLock.ts';

const ReleaseSlotPayload = z.object({ id: z.number().int(), leaseId: z.number().int(), poolId: z.number().int() });

/** A resource's commands: it takes its slots back and passes them on. */
export const RESOURCE_COMMANDS = {
  /**
   * A lease gives its slot back: the slot goes to the oldest lease waiting
   * in the pool's line, with a grant to that lease, or is left free. The
   * lock (shared: release_slots run together) comes first, and the line is
   * read by the statement after it, with a fresh snapshot (see allocate).
   */
  release_slot: command('resource', ReleaseSlotPayload, async (client, { id, leaseId, poolId }) => {
    await transaction(client, async () => {
      await client.query('select pg_advisory_xact_lock_shared($1, $2)', [POOL_LINE_LOCK, poolId]);
      await client.query(
        `with held as (select 1 from ${PEER_SCHEMA}.slots where resource_id = $1 and lease_id = $2),
              next as (
                delete from ${PEER_SCHEMA}.waiters where lease_id = (
                  select lease_id from ${PEER_SCHEMA}.waiters where pool_id = $3 and exists (select from held)
                   order by lease_id limit 1 for update skip locked)
                returning lease_id),
              passed as (
                update ${PEER_SCHEMA}.slots set lease_id = (select lease_id from next)
                 where resource_id = $1 and lease_id = $2 returning slot, lease_id)
         select ${PEER_SCHEMA}.append('lease', lease_id, 'grant', jsonb_build_object('resourceId', $1::int, 'slot', slot, 'poolId', $3::int))
           from passed where lease_id is not null`,
        [id, leaseId, poolId],
      );
      return 'commit';
    });
  }),
};
