import type pg from 'pg';
import { runMigrations } from 'graphile-worker';
import type { Logger } from '../../src/log.ts';
import { graphileLogger } from '../../src/graphileLogger.ts';

/** The peer's own tables, apart from Slipway's. */
export const PEER_SCHEMA = 'bench_peer';
/** graphile-worker's tables for the peer, apart from the ones Slipway's workers use. */
export const PEER_WORKER_SCHEMA = 'bench_peer_worker';
/** Channel on which the peer announces leases becoming active and destroyed (`active:<id>`, `destroyed:<id>`). */
export const PEER_CHANNEL = 'bench_peer';

/**
 * The peer's data model, the least that leases on pooled slots need: pools
 * of resources, one row per slot (its lease, or none: free), leases with a
 * state column, and each pool's line of leases waiting for a slot.
 *
 * `append(target, id, task, payload)` is how anything (a caller, or a job
 * in its own transaction) queues a command: a graphile-worker job in the
 * object's own named queue (`lease:7`, `resource:3`), as graphile-worker's
 * documentation recommends for work that must run one at a time per
 * object. Its id is the job's payload's `id`.
 */
const TABLES = `
  create schema ${PEER_SCHEMA};
  create table ${PEER_SCHEMA}.pools (
    id int generated always as identity primary key,
    name text not null
  );
  create table ${PEER_SCHEMA}.resources (
    id int generated always as identity primary key,
    pool_id int not null references ${PEER_SCHEMA}.pools
  );
  create table ${PEER_SCHEMA}.slots (
    resource_id int not null references ${PEER_SCHEMA}.resources,
    slot int not null,
    pool_id int not null references ${PEER_SCHEMA}.pools,
    -- Unique: a lease never holds two slots, whatever runs at once.
    lease_id int unique,
    primary key (resource_id, slot)
  );
  create index on ${PEER_SCHEMA}.slots (pool_id) where lease_id is null;
  create table ${PEER_SCHEMA}.leases (
    id int generated always as identity primary key,
    pool_id int not null references ${PEER_SCHEMA}.pools,
    state text not null default 'pending'
      check (state in ('pending', 'active', 'destroyed')),
    resource_id int,
    slot int,
    created_at timestamptz not null default now()
  );
  create index on ${PEER_SCHEMA}.leases (pool_id, state);
  -- Oldest first: lease ids grow with creation.
  create table ${PEER_SCHEMA}.waiters (
    lease_id int primary key references ${PEER_SCHEMA}.leases,
    pool_id int not null references ${PEER_SCHEMA}.pools
  );
  create index on ${PEER_SCHEMA}.waiters (pool_id, lease_id);
  create function ${PEER_SCHEMA}.append(target text, target_id int, task text, payload jsonb default '{}') returns bigint
  language sql as $$
    select (${PEER_WORKER_SCHEMA}.add_job(
      task,
      (payload || jsonb_build_object('id', target_id))::json,
      queue_name => target || ':' || target_id
    )).id
  $$;
`;

/** Installs graphile-worker's schema for the peer, then the peer's tables, in the benchmark's database. */
export async function installPeer(pool: pg.Pool, databaseUrl: string, log: Logger): Promise<void> {
  await runMigrations({ connectionString: databaseUrl, schema: PEER_WORKER_SCHEMA, logger: graphileLogger(log) });
  await pool.query(TABLES);
}

/** A pool of `resources` resources, each with `slotsPerResource` free slots; its id. */
export async function createPeerPool(pool: pg.Pool, name: string, resources: number, slotsPerResource: number): Promise<number> {
  const { rows } = await pool.query<{ id: number }>(`insert into ${PEER_SCHEMA}.pools (name) values ($1) returning id`, [name]);
  const poolId = rows[0]!.id;
  await pool.query(
    `with r as (insert into ${PEER_SCHEMA}.resources (pool_id) select $1 from generate_series(1, $2) returning id)
     insert into ${PEER_SCHEMA}.slots (resource_id, slot, pool_id) select r.id, s, $1 from r, generate_series(0, $3 - 1) as s`,
    [poolId, resources, slotsPerResource],
  );
  return poolId;
}
