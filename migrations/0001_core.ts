import { type Kysely, sql } from 'kysely';

/**
 * The core schema: the three kinds of object, their per-object command queues,
 * their event logs, the worker registry, and two tables owned by single
 * writers (a resource's slots, a blueprint's waiting leases).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table blueprints (
      id bigint generated always as identity primary key,
      name text not null unique check (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
      driver text not null,
      settings jsonb not null default '{}',
      max_resources int not null check (max_resources > 0),
      leases_per_resource int not null check (leases_per_resource > 0),
      state text not null default 'enabled' check (state in ('enabled', 'disabled')),
      -- resources not yet destroyed; written only by the blueprint's drain
      live_resources int not null default 0 check (live_resources >= 0),
      version int not null default 1,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    );

    create table resources (
      id bigint generated always as identity primary key,
      blueprint_id bigint not null references blueprints (id),
      state text not null default 'pending'
        check (state in ('pending', 'active', 'released', 'broken', 'destroyed')),
      capacity int not null check (capacity > 0),
      used_slots int not null default 0 check (used_slots >= 0 and used_slots <= capacity),
      -- the lease whose need made the blueprint allocate this resource
      allocated_for_lease_id bigint,
      attributes jsonb not null default '{}',
      message text,
      version int not null default 1,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    );
    create index resources_by_blueprint_state on resources (blueprint_id, state);
    -- one lease never has two resources being made for it at once
    create unique index resources_one_per_lease on resources (allocated_for_lease_id)
      where state in ('pending', 'active');

    create table leases (
      id bigint generated always as identity primary key,
      blueprint_id bigint not null references blueprints (id),
      holder text not null,
      state text not null default 'pending'
        check (state in ('pending', 'acquired', 'active', 'released', 'broken', 'destroyed')),
      resource_id bigint references resources (id),
      slot int,
      attributes jsonb not null default '{}',
      expires_at timestamptz,
      message text,
      version int not null default 1,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    );
    create index leases_by_blueprint_state on leases (blueprint_id, state);
    create index leases_by_resource on leases (resource_id) where resource_id is not null;

    -- A resource's slots, written only by that resource's drain. The primary
    -- key and the check on slot make overbooking impossible even if the drain
    -- had a bug; lease_id unique means a lease holds at most one slot anywhere.
    create table resource_slots (
      resource_id bigint not null references resources (id),
      slot int not null check (slot >= 0),
      lease_id bigint not null unique references leases (id),
      granted_at timestamptz not null default now(),
      primary key (resource_id, slot)
    );

    -- Leases waiting for capacity, written only by the blueprint's drain and
    -- served oldest lease first.
    create table blueprint_waiters (
      lease_id bigint primary key references leases (id),
      blueprint_id bigint not null references blueprints (id),
      since timestamptz not null,
      created_at timestamptz not null default now()
    );
    create index blueprint_waiters_queue on blueprint_waiters (blueprint_id, since, lease_id);

    create table commands (
      id bigint generated always as identity primary key,
      target_kind text not null check (target_kind in ('blueprint', 'resource', 'lease')),
      target_id bigint not null,
      kind text not null,
      version int not null default 1,
      payload jsonb not null default '{}',
      issued_by text not null,
      source text not null check (source in ('web', 'cli', 'api', 'gc', 'system')),
      reason text,
      request_id text,
      caused_by bigint references commands (id) on delete set null,
      status text not null default 'queued'
        check (status in ('queued', 'running', 'done', 'failed', 'cancelled', 'coalesced')),
      message text,
      -- commands with the same dedup key never wait twice on one object
      dedup_key text,
      coalesced_into bigint references commands (id) on delete set null,
      not_before timestamptz not null default now(),
      attempts int not null default 0,
      created_at timestamptz not null default now(),
      started_at timestamptz,
      finished_at timestamptz
    );
    -- the queue head of one object
    create index commands_queue on commands (target_kind, target_id, id)
      where status in ('queued', 'running');
    -- the sweeper's view: unsettled commands by age
    create index commands_unsettled on commands (not_before)
      where status in ('queued', 'running');
    create unique index commands_one_in_flight on commands (target_kind, target_id, dedup_key)
      where dedup_key is not null and status in ('queued', 'running');
    create index commands_by_target on commands (target_kind, target_id, id);
    create index commands_by_cause on commands (caused_by) where caused_by is not null;

    create table events (
      id bigint generated always as identity primary key,
      target_kind text not null check (target_kind in ('blueprint', 'resource', 'lease')),
      target_id bigint not null,
      command_id bigint references commands (id) on delete set null,
      type text not null,
      from_state text,
      to_state text,
      message text not null,
      actor text not null,
      source text not null,
      data jsonb,
      created_at timestamptz not null default now()
    );
    create index events_by_target on events (target_kind, target_id, id);

    -- The advisory-lock key of one object, namespaced per object kind. The one
    -- definition both the drain (which takes the lock) and the sweeper (which
    -- looks in pg_locks for a holder) use.
    create function object_lock_key(kind text, id bigint) returns bigint
      language sql immutable strict parallel safe
      as $fn$
        select (x'534c'::bigint << 48)
             | ((case kind when 'blueprint' then 1 when 'resource' then 2 when 'lease' then 3 end)::bigint << 40)
             | id
      $fn$;

    -- The graphile-worker job key of an object's wake-up: one pending drain
    -- job per object. The one definition appends and the sweeper use.
    create function object_drain_job_key(kind text, id bigint) returns text
      language sql immutable strict parallel safe
      as $fn$ select 'drain:' || kind || ':' || id $fn$;

    create table workers (
      id text primary key,
      hostname text not null,
      pid int not null,
      handles jsonb not null,
      started_at timestamptz not null default now(),
      heartbeat_at timestamptz not null default now()
    );
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    drop table workers, events, commands, blueprint_waiters, resource_slots, leases, resources, blueprints;
    drop function object_lock_key(text, bigint);
    drop function object_drain_job_key(text, bigint);
  `.execute(db);
}
