import { type Kysely, sql } from 'kysely';

/**
 * The `static-pool` driver's record of which entry of a blueprint's settings
 * each resource stands for. Written by the driver outside the drain's
 * transactions (a claim is made in allocateResource and dropped in
 * destroyResource), like any driver's outside world. The primary key makes
 * two resources standing for one entry impossible; `resource_id` unique makes
 * a repeated allocate find its own claim.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table static_pool_claims (
      blueprint_id bigint not null references blueprints (id),
      entry text not null,
      resource_id bigint not null unique,
      -- the entry as it was when claimed: a settings change that alters it retires the resource
      definition jsonb not null,
      claimed_at timestamptz not null default now(),
      primary key (blueprint_id, entry)
    );
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table static_pool_claims`.execute(db);
}
