import { type Kysely, sql } from 'kysely';

/**
 * Teams, fair share and quotas (docs/scheduling.md):
 *
 * - `teams`: a name and a weight. Every token belongs to one
 *   (`api_tokens.team`), and every lease to its requester's
 *   (`leases.team`); the team `default`, made here, holds every token and
 *   lease that came before. A team is referred to by its name, which never
 *   changes: leases and history name it long after.
 * - `quotas`: at most `max_leases` leases of a team (or of one holder in
 *   it, `holder`) counted at once, at one blueprint or overall
 *   (`blueprint_id` null).
 * - `team_events`: every change to a team, its weight or its quotas, with
 *   who made it.
 * - `blueprint_waiters.team`: the line, by team, so a blueprint finds each
 *   team's first waiter with one index probe per team
 *   (`blueprint_waiters_by_team`), however long the line.
 * - `commands_acquires_in_flight`: the acquires sent to resources and not
 *   yet applied, which a quota counts with the slots held
 *   (src/db/countedLeases.ts); a small index, of only the acquires
 *   on their way.
 *
 * Expand only: a worker or API of the release before writes leases and
 * waiter rows without a team, which puts them in `default`.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table teams (
      name text primary key check (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
      weight int not null default 1 check (weight between 1 and 1000),
      created_by text not null,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    );
    insert into teams (name, created_by) values ('default', 'migration 0027_teams');

    create table quotas (
      id bigint generated always as identity primary key,
      team text not null references teams (name),
      holder text check (length(holder) between 1 and 200),
      blueprint_id bigint references blueprints (id) on delete cascade,
      max_leases int not null check (max_leases between 0 and 100000),
      created_by text not null,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    );
    create unique index quotas_one_per_scope on quotas (team, coalesce(holder, ''), coalesce(blueprint_id, 0));

    create table team_events (
      id bigint generated always as identity primary key,
      team text not null references teams (name),
      type text not null,
      message text not null,
      data jsonb not null default '{}',
      actor text not null,
      source text not null,
      created_at timestamptz not null default now()
    );
    create index team_events_by_team on team_events (team, id);

    alter table api_tokens add column team text not null default 'default' references teams (name);
    alter table leases add column team text not null default 'default' references teams (name);
    alter table blueprint_waiters add column team text not null default 'default';
    create index blueprint_waiters_by_team on blueprint_waiters (blueprint_id, team, since, lease_id);
    create index commands_acquires_in_flight on commands (target_id)
      where target_kind = 'resource' and kind = 'acquire' and status in ('queued', 'running');
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    drop index commands_acquires_in_flight;
    drop index blueprint_waiters_by_team;
    alter table blueprint_waiters drop column team;
    alter table leases drop column team;
    alter table api_tokens drop column team;
    drop table team_events;
    drop table quotas;
    drop table teams;
  `.execute(db);
}
