import type pg from 'pg';
import { z } from 'zod';
import { command, transaction } from './peerCommand.ts';
import { PEER_CHANNEL, PEER_SCHEMA } from './peerSchema.ts';
import { POOL_LINE_LOCK } from './poolLineLock.ts';

/** The peer's driver: calls that do nothing, like Slipway's simulated driver at zero latency. */
const driver = {
  acquireLease: async () => {},
  activateLease: async () => {},
  releaseLease: async () => {},
};

const LeasePayload = z.object({ id: z.number().int() });
const GrantPayload = LeasePayload.extend({ resourceId: z.number().int(), slot: z.number().int(), poolId: z.number().int() });

async function leaseRow(client: pg.PoolClient, id: number): Promise<{ pool_id: number; state: string }> {
  const { rows } = await client.query(`select pool_id, state from ${PEER_SCHEMA}.leases where id = $1`, [id]);
  return rows[0];
}

/**
 * A free slot of the pool, taken for the lease, if one is free and no
 * other transaction is taking it (SKIP LOCKED: concurrent allocates spread
 * over the free slots instead of queueing on one).
 */
async function takeFreeSlot(client: pg.PoolClient, poolId: number, leaseId: number): Promise<{ resource_id: number; slot: number } | undefined> {
  const { rows } = await client.query(
    `update ${PEER_SCHEMA}.slots s set lease_id = $2
       from (select resource_id, slot from ${PEER_SCHEMA}.slots where pool_id = $1 and lease_id is null
             limit 1 for update skip locked) free
      where s.resource_id = free.resource_id and s.slot = free.slot
     returning s.resource_id, s.slot`,
    [poolId, leaseId],
  );
  return rows[0];
}

/**
 * The driver's acquire and activation, then the lease active on its slot,
 * in one statement (as Slipway's grant does both, decision 0025); false if
 * the lease is no longer pending.
 */
async function acquire(client: pg.PoolClient, leaseId: number, resourceId: number, slot: number): Promise<boolean> {
  await driver.acquireLease();
  await driver.activateLease();
  const { rowCount } = await client.query(
    `with l as (update ${PEER_SCHEMA}.leases set state = 'active', resource_id = $2, slot = $3
                 where id = $1 and state = 'pending' returning id)
     select pg_notify('${PEER_CHANNEL}', 'active:' || id) from l`,
    [leaseId, resourceId, slot],
  );
  return rowCount === 1;
}

/** Hands a slot back to its resource, which passes it to the next lease waiting. */
async function giveBack(client: pg.PoolClient, resourceId: number, leaseId: number, poolId: number): Promise<void> {
  await client.query(`select ${PEER_SCHEMA}.append('resource', $1, 'release_slot', jsonb_build_object('leaseId', $2::int, 'poolId', $3::int))`, [
    resourceId,
    leaseId,
    poolId,
  ]);
}

/**
 * A lease's commands. Every write is conditional on the state it was
 * decided on (`where state = …`), so a job that races another of the same
 * lease changes nothing instead of corrupting it; the benchmark counts such
 * races (jobRuns.ts). Where Slipway sends a lease's request for a slot
 * through its blueprint's and its resource's queues (need_resource, acquire, grant), the peer takes
 * the slot with a row lock in one job: the shortest correct path
 * graphile-worker allows.
 */
export const LEASE_COMMANDS = {
  allocate: command('lease', LeasePayload, async (client, { id }) => {
    const lease = await leaseRow(client, id);
    if (lease.state !== 'pending') return; // released before it was served
    await transaction(client, async () => {
      let slot = await takeFreeSlot(client, lease.pool_id, id);
      if (!slot) {
        // Before joining the line, exclude release_slot (it holds this lock
        // shared): either it sees this lease waiting, or the statement after
        // the lock (a fresh snapshot) sees the slot it freed.
        await client.query('select pg_advisory_xact_lock($1, $2)', [POOL_LINE_LOCK, lease.pool_id]);
        slot = await takeFreeSlot(client, lease.pool_id, id);
      }
      if (!slot) {
        await client.query(`insert into ${PEER_SCHEMA}.waiters (lease_id, pool_id) values ($1, $2)`, [id, lease.pool_id]);
        return 'commit';
      }
      return (await acquire(client, id, slot.resource_id, slot.slot)) ? 'commit' : 'rollback';
    });
  }),

  /** A resource passed this waiting lease a slot. */
  grant: command('lease', GrantPayload, async (client, { id, resourceId, slot, poolId }) => {
    const lease = await leaseRow(client, id);
    const acquired = lease.state === 'pending' && (await acquire(client, id, resourceId, slot));
    // Released while the slot was on its way.
    if (!acquired) await giveBack(client, resourceId, id, poolId);
  }),

  /** Released and destroyed in one job, its slot handed back, as Slipway's release does (decision 0024). */
  release: command('lease', LeasePayload, async (client, { id }) => {
    const lease = await leaseRow(client, id);
    if (!['pending', 'active'].includes(lease.state)) return;
    if (lease.state !== 'pending') await driver.releaseLease();
    // A waiting lease leaves the line. If a release_slot took it from the
    // line first, its grant finds the lease destroyed and hands the slot back.
    await client.query(
      `with l as (update ${PEER_SCHEMA}.leases set state = 'destroyed' where id = $1 and state = $2
                  returning id, pool_id, resource_id),
            w as (delete from ${PEER_SCHEMA}.waiters where lease_id in (select id from l))
       select pg_notify('${PEER_CHANNEL}', 'destroyed:' || id),
              case when resource_id is not null
                then ${PEER_SCHEMA}.append('resource', resource_id, 'release_slot', jsonb_build_object('leaseId', id, 'poolId', pool_id))
              end
         from l`,
      [id, lease.state],
    );
  }),
};
