import { Kysely, PostgresDialect } from 'kysely';
import type pg from 'pg';
import type { DB } from '../../migrations/schema.ts';
import type { Db } from './Database.ts';
import { statementName } from './preparedText.ts';

/**
 * A Kysely instance that runs every query on one already-checked-out
 * connection: the drain's, which holds the object's session advisory lock and
 * its open transaction. Kysely's "release" of it is a no-op; the drain gives
 * the connection back itself. `beforeQuery`, if given, runs before each
 * query (the drain opens its outcome transaction there on first use).
 *
 * Every query with parameters goes as a named prepared statement, parsed
 * once per connection: these are the handlers' reads and writes, a fixed
 * set of statements sent over and over, and parsing and planning each anew
 * was most of their server time (a lease made active on a free slot waits
 * for a blueprint decision of five such reads, a slot taken and a grant;
 * docs/internals.md#where-the-time-goes). So the SQL a handler builds must
 * have a fixed text: a list as an array parameter (`= any($1)`), never a
 * list of parameters as long as the list. PostgreSQL plans each execution
 * afresh until a generic plan is no dearer than the custom ones were, and
 * replans when a table's definition or statistics change; a statement whose
 * result columns a migration changed fails, and the drain discards a
 * connection on any failure, so the next one prepares afresh (as with
 * preparedText.ts).
 */
export function kyselyOnClient(client: pg.PoolClient, beforeQuery?: () => Promise<void>): Db {
  const query = (text: string, values?: unknown[]) =>
    values && values.length > 0 ? client.query({ name: statementName(text, 'slipway_named'), text, values }) : client.query(text, values);
  const borrowed = {
    query: beforeQuery
      ? async (text: string, values?: unknown[]) => {
          await beforeQuery();
          return query(text, values);
        }
      : query,
    release() {},
  };
  const pool = { connect: async () => borrowed, end: async () => {} };
  return new Kysely<DB>({ dialect: new PostgresDialect({ pool: pool as unknown as pg.Pool }) });
}
