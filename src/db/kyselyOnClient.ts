import { Kysely, PostgresDialect } from 'kysely';
import type pg from 'pg';
import type { DB } from '../../migrations/schema.ts';
import type { Db } from './Database.ts';

/**
 * A Kysely instance that runs every query on one already-checked-out
 * connection: the drain's, which holds the object's session advisory lock and
 * its open transaction. Kysely's "release" of it is a no-op; the drain gives
 * the connection back itself.
 */
export function kyselyOnClient(client: pg.PoolClient): Db {
  const borrowed = { query: client.query.bind(client), release() {} };
  const pool = { connect: async () => borrowed, end: async () => {} };
  return new Kysely<DB>({ dialect: new PostgresDialect({ pool: pool as unknown as pg.Pool }) });
}
