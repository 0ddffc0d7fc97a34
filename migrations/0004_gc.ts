import { type Kysely, sql } from 'kysely';

/**
 * The garbage collector's schema: lease expiry and heartbeats, a resource's
 * idle time, a blueprint's warm minimum and idle timeout, the record of
 * collector passes, and the indexes that keep the collector's scans and
 * history pruning cheap.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    alter table leases
      -- how long a renewal without its own term extends expires_at by
      add column term_ms bigint check (term_ms > 0),
      -- a heartbeat lease: its holder renews at least this often
      add column heartbeat_ms int check (heartbeat_ms > 0),
      -- when the collector releases a heartbeat lease nobody renewed
      add column heartbeat_deadline timestamptz;
    -- the collector's view: live leases with a deadline, soonest first
    create index leases_expiring on leases (expires_at)
      where expires_at is not null and state in ('pending', 'acquired', 'active');
    create index leases_heartbeat_due on leases (heartbeat_deadline)
      where heartbeat_deadline is not null and state in ('pending', 'acquired', 'active');
    create index leases_destroyed on leases (updated_at) where state = 'destroyed';

    alter table resources
      -- since when no lease holds it (null while one does); written by its drain
      add column idle_since timestamptz;
    create index resources_idle on resources (blueprint_id, idle_since)
      where state = 'active' and used_slots = 0;
    create index resources_destroyed on resources (updated_at) where state = 'destroyed';

    alter table blueprints
      -- active resources the collector keeps ready (the warm minimum)
      add column min_resources int not null default 0 check (min_resources >= 0),
      -- idle resources beyond the minimum are reclaimed after this long (null: kept)
      add column idle_timeout_ms bigint check (idle_timeout_ms > 0),
      add constraint blueprints_min_within_max check (min_resources <= max_resources);

    -- Pruning deletes commands: the references to them (on delete set null)
    -- must be found by index, not by a scan per deleted row.
    create index commands_by_coalesced_into on commands (coalesced_into) where coalesced_into is not null;
    create index events_by_command on events (command_id) where command_id is not null;

    -- One row per collector pass: when it ran, why, and what it found and did.
    create table gc_passes (
      id bigint generated always as identity primary key,
      trigger text not null check (trigger in ('schedule', 'cli')),
      status text not null default 'running' check (status in ('running', 'done', 'failed', 'skipped')),
      started_at timestamptz not null default now(),
      finished_at timestamptz,
      report jsonb not null default '{}',
      message text
    );
    create index gc_passes_recent on gc_passes (started_at);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    drop table gc_passes;
    drop index commands_by_coalesced_into, events_by_command;
    alter table blueprints drop constraint blueprints_min_within_max, drop column min_resources, drop column idle_timeout_ms;
    alter table resources drop column idle_since;
    alter table leases drop column term_ms, drop column heartbeat_ms, drop column heartbeat_deadline;
  `.execute(db);
}
