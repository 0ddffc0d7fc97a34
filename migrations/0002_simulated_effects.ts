import { type Kysely, sql } from 'kysely';

/**
 * The `simulated` driver's "outside world": one row per distinct effect
 * (operation, object, idempotency key), with how many calls reached it. Kept in
 * the database so that tests and benchmarks can count effects across worker
 * processes. Written outside the drain's transactions, like a real system.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table simulated_effects (
      operation text not null,
      object_id bigint not null,
      idempotency_key text not null,
      calls int not null default 1,
      first_at timestamptz not null default now(),
      last_at timestamptz not null default now(),
      primary key (operation, object_id, idempotency_key)
    );
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table simulated_effects`.execute(db);
}
