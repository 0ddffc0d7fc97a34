import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { Logger } from '../log.ts';
import { Database } from './Database.ts';
import { migrate } from './migrate.ts';

export type FreshDatabase = Database & { drop(): Promise<void> };

/**
 * A new database on the server at `adminUrl` (the role needs CREATEDB),
 * named `<prefix>_<random>` and migrated to the latest schema; `drop()`
 * closes it and drops it. For the tests, the benchmark and `npm run schema`,
 * which must never see another run's leftovers.
 */
export async function createFreshDatabase(adminUrl: string, log: Logger, options: { prefix: string; poolSize?: number }): Promise<FreshDatabase> {
  const name = `${options.prefix}_${randomBytes(5).toString('hex')}`;
  await onAdminConnection(adminUrl, (admin) => admin.query(`create database ${name}`));
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const database = Database.fromUrl(url.toString(), log, { poolSize: options.poolSize });
  const fresh = Object.assign(database, {
    async drop() {
      await database.close();
      await onAdminConnection(adminUrl, (admin) => admin.query(`drop database if exists ${name} with (force)`));
    },
  });
  try {
    await migrate(database, log);
  } catch (error) {
    await fresh.drop();
    throw error;
  }
  return fresh;
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
