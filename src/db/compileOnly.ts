import { Kysely, PostgresDialect } from 'kysely';
import type pg from 'pg';
import type { DB } from '../../migrations/schema.ts';
import type { Db } from './Database.ts';

/**
 * A Kysely that compiles queries and runs none: every query fails with
 * `refusal`. For building statements that are sent elsewhere, and for code
 * that has declared it makes no queries (a drain decision without
 * readsInTransaction), so that one that does fails naming itself.
 */
export function compileOnly(refusal: string): Db {
  const pool = {
    connect: async () => {
      throw new Error(refusal);
    },
    end: async () => {},
  };
  return new Kysely<DB>({ dialect: new PostgresDialect({ pool: pool as unknown as pg.Pool }) });
}
