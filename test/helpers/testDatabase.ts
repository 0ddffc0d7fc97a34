import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { Database } from '../../src/db/Database.ts';
import { migrate } from '../../src/db/migrate.ts';
import { createLogger, type Logger } from '../../src/log.ts';

export const testLog: Logger = createLogger(process.env.LOG_LEVEL ?? 'warn', 'test');

/** A fresh, migrated database of this test file's own, dropped by `drop()`. */
export async function createTestDatabase(options: { poolSize?: number } = {}): Promise<
  Database & { drop(): Promise<void> }
> {
  const admin = new URL(inject('adminUrl'));
  const name = `slipway_t_${randomBytes(5).toString('hex')}`;
  const client = new pg.Client({ connectionString: admin.toString() });
  await client.connect();
  await client.query(`create database ${name}`);
  await client.end();
  const url = new URL(admin);
  url.pathname = `/${name}`;
  const database = Database.fromUrl(url.toString(), testLog, options);
  await migrate(database, testLog);
  return Object.assign(database, {
    async drop() {
      await database.close();
      const c = new pg.Client({ connectionString: admin.toString() });
      await c.connect();
      await c.query(`drop database if exists ${name} with (force)`);
      await c.end();
    },
  });
}
