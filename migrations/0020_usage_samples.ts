import { type Kysely, sql } from 'kysely';

/**
 * What the web UI's charts draw: each collector pass samples how Slipway is
 * used, so a page reads an hour of use from about sixty small rows instead
 * of counting over commands and events, which stays cheap however large
 * those tables grow (src/gc/sampleUsage.ts).
 *
 * A sample belongs to its pass and goes with it when the collector prunes
 * old passes. The marks (the newest command and event ids it saw) are where
 * the next sample starts counting; the counts are null in a first sample,
 * which has nothing to count from. The waits (created → active, of the
 * leases made active since the previous sample) are kept for the whole
 * system and per blueprint: percentiles do not add up.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table usage_samples (
      pass_id bigint primary key references gc_passes (id) on delete cascade,
      sampled_at timestamptz not null default now(),
      last_command_id bigint not null,
      last_event_id bigint not null,
      commands_appended integer,
      commands_failed integer,
      leases_activated integer,
      wait_p50_ms integer,
      wait_p95_ms integer
    );
    create index usage_samples_recent on usage_samples (sampled_at);

    create table blueprint_usage_samples (
      pass_id bigint not null references usage_samples (pass_id) on delete cascade,
      blueprint_id bigint not null references blueprints (id) on delete cascade,
      leases jsonb not null,
      leases_waiting integer not null,
      resources jsonb not null,
      leases_activated integer,
      wait_p50_ms integer,
      wait_p95_ms integer,
      primary key (pass_id, blueprint_id)
    );
    create index blueprint_usage_samples_by_blueprint on blueprint_usage_samples (blueprint_id, pass_id);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table blueprint_usage_samples, usage_samples`.execute(db);
}
