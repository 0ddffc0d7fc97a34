import { Kysely, PostgresDialect } from 'kysely';
import type pg from 'pg';
import type { DB } from '../../migrations/schema.ts';
import type { Db } from './Database.ts';

/** One Kysely, with its dialect and driver, per connection: building them was most of a step's cost here. */
const onClient = new WeakMap<pg.PoolClient, Db>();

/**
 * A Kysely instance that runs every query on one already-checked-out
 * connection: the drain's, which holds the object's session advisory lock and
 * its open transaction. Kysely's "release" of it is a no-op; the drain gives
 * the connection back itself. Each call answers a new instance, so state
 * kept per step (perStep.ts, keyed by it) never outlives the step, on the
 * connection's one driver.
 */
export function kyselyOnClient(client: pg.PoolClient): Db {
  let db = onClient.get(client);
  if (!db) {
    const query = client.query.bind(client) as (...args: unknown[]) => Promise<unknown>;
    const pool = { connect: async () => ({ query, release() {} }), end: async () => {} };
    db = new Kysely<DB>({ dialect: new PostgresDialect({ pool: pool as unknown as pg.Pool }) });
    onClient.set(client, db);
  }
  return db.withoutPlugins();
}
