import path from 'node:path';
import type { Database } from '../src/db/Database.ts';
import { EmbeddedDatabase } from '../src/db/EmbeddedDatabase.ts';
import { createFreshDatabase } from '../src/db/freshDatabase.ts';
import type { Logger } from '../src/log.ts';

/** Where the embedded server keeps its cluster: apart from `npm start`'s and the tests'. */
export const EMBEDDED_HOME = path.resolve('.slipway', 'bench');

export interface BenchDatabase {
  /** The fresh, migrated database every measurement runs in. */
  readonly database: Database;
  /** True when this run started the embedded server; false: DATABASE_URL's (never the URL in figures: it may hold a password). */
  readonly embedded: boolean;
  /** Drops the database and stops the embedded server if this run started it. */
  close(): Promise<void>;
}

/**
 * A fresh database for one run, on DATABASE_URL's server if set (the role
 * needs CREATEDB), otherwise on an embedded PostgreSQL under .slipway/bench.
 * A fresh one each run, so no run is measured against another's leftovers.
 */
export async function openBenchDatabase(log: Logger, poolSize: number, home = EMBEDDED_HOME): Promise<BenchDatabase> {
  const embedded = process.env.DATABASE_URL ? undefined : await EmbeddedDatabase.open(home, log, 'postgres');
  try {
    const database = await createFreshDatabase(process.env.DATABASE_URL ?? embedded!.url, log, { prefix: 'slipway_bench', poolSize });
    const close = async () => {
      await database.drop();
      await embedded?.stop();
    };
    return { database, embedded: embedded !== undefined, close };
  } catch (error) {
    await embedded?.stop();
    throw error;
  }
}
