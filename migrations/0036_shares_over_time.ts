import { type Kysely, sql } from 'kysely';

/**
 * Shares that hold over time (docs/scheduling.md, decision 0040):
 *
 * - a blueprint's `fair_share_half_life_ms`: how fast what a team used
 *   there is forgotten (an hour unless set);
 * - `team_usage`: per blueprint and team, the slot-time the team used there
 *   and the leases granted to it, each decayed with that half-life, as of
 *   `at`; and `held`, the slots the team held as the blueprint's last
 *   decision left them (null: not known since, as its line was left empty).
 *   Written only by the blueprint's drain, in the decisions that weigh
 *   teams; read by them, and by a waiting lease's estimate.
 *
 * Expand only: a worker of the release before decides as before and
 * writes no row; the rows catch up at the next decision of this release's.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    alter table blueprints add column fair_share_half_life_ms bigint not null default 3600000
      check (fair_share_half_life_ms > 0 and fair_share_half_life_ms <= 31536000000);
    create table team_usage (
      blueprint_id bigint not null references blueprints (id) on delete cascade,
      team text not null references teams (name),
      slot_seconds float8 not null check (slot_seconds >= 0),
      grants float8 not null check (grants >= 0),
      held int check (held >= 0),
      at timestamptz not null,
      primary key (blueprint_id, team)
    );
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    drop table team_usage;
    alter table blueprints drop column fair_share_half_life_ms;
  `.execute(db);
}
