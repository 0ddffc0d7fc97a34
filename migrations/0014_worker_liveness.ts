import { type Kysely, sql } from 'kysely';

/**
 * What a sweeper needs to free graphile-worker jobs held by a dead worker
 * (a SIGKILL, or a runner that stopped on a lost connection): the pools
 * whose locks on jobs (`locked_by`) each live worker answers for. A worker's
 * liveness itself is the session advisory lock its registry connection holds
 * (see src/worker/WorkerRegistry.ts), which PostgreSQL drops the moment the
 * process or its connection dies. Expand only: workers of the version
 * before never write the column and keep working. Each worker also records
 * the Slipway version it runs (null for those before), so an operator can
 * see a rolling upgrade's progress in the registry.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table workers add column job_lockers text[] not null default '{}', add column version text`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table workers drop column job_lockers, drop column version`.execute(db);
}
