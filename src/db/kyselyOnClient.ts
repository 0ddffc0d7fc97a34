import { Kysely, PostgresDialect } from 'kysely';
import type pg from 'pg';
import type { DB } from '../../migrations/schema.ts';
import type { Db } from './Database.ts';

/**
 * A Kysely instance that runs every query on one already-checked-out
 * connection: the drain's, which holds the object's session advisory lock and
 * its open transaction. Kysely's "release" of it is a no-op; the drain gives
 * the connection back itself. `beforeQuery`, if given, runs before each
 * query (the drain opens its outcome transaction there on first use).
 */
export function kyselyOnClient(client: pg.PoolClient, beforeQuery?: () => Promise<void>): Db {
  const query = client.query.bind(client) as (...args: unknown[]) => Promise<unknown>;
  const borrowed = {
    query: beforeQuery
      ? async (...args: unknown[]) => {
          await beforeQuery();
          return query(...args);
        }
      : query,
    release() {},
  };
  const pool = { connect: async () => borrowed, end: async () => {} };
  return new Kysely<DB>({ dialect: new PostgresDialect({ pool: pool as unknown as pg.Pool }) });
}
