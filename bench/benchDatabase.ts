import { randomBytes } from 'node:crypto';
import path from 'node:path';
import pg from 'pg';
import { Database } from '../src/db/Database.ts';
import { EmbeddedDatabase } from '../src/db/EmbeddedDatabase.ts';
import { migrate } from '../src/db/migrate.ts';
import type { Logger } from '../src/log.ts';

/** Where the embedded server keeps its cluster: apart from `npm start`'s and the tests'. */
const EMBEDDED_HOME = path.resolve('.slipway', 'bench');

export interface BenchDatabase {
  /** The fresh, migrated database every measurement runs in. */
  readonly database: Database;
  /** Where it lives, for the report (never the URL: it may hold a password). */
  readonly server: 'embedded PostgreSQL' | 'DATABASE_URL';
  /** Drops the database and stops the embedded server if this run started it. */
  close(): Promise<void>;
}

/**
 * A fresh database for one run, on DATABASE_URL's server if set (the role
 * needs CREATEDB), otherwise on an embedded PostgreSQL under .slipway/bench.
 * A fresh one each run, so no run is measured against another's leftovers.
 */
export async function openBenchDatabase(log: Logger, poolSize: number): Promise<BenchDatabase> {
  const embedded = process.env.DATABASE_URL ? undefined : await EmbeddedDatabase.open(EMBEDDED_HOME, log, 'postgres');
  const adminUrl = process.env.DATABASE_URL ?? embedded!.url;
  const name = `slipway_bench_${randomBytes(4).toString('hex')}`;
  await onAdminConnection(adminUrl, (admin) => admin.query(`create database ${name}`));
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const database = Database.fromUrl(url.toString(), log, { poolSize });
  const close = async () => {
    await database.close();
    await onAdminConnection(adminUrl, (admin) => admin.query(`drop database if exists ${name} with (force)`));
    await embedded?.stop();
  };
  try {
    await migrate(database, log);
  } catch (error) {
    await close();
    throw error;
  }
  return { database, server: embedded ? 'embedded PostgreSQL' : 'DATABASE_URL', close };
}

async function onAdminConnection(url: string, work: (client: pg.Client) => Promise<unknown>): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await work(client);
  } finally {
    await client.end();
  }
}
