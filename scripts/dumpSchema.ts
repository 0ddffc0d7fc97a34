import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { EmbeddedDatabase } from '../src/db/EmbeddedDatabase.ts';
import { createFreshDatabase } from '../src/db/freshDatabase.ts';
import { dumpSchema, SCHEMA_FILE } from '../src/db/schemaDump.ts';
import { createLogger } from '../src/log.ts';

/**
 * `npm run schema`: migrates a new database from scratch and writes its
 * schema to migrations/schema.sql. The database is made on DATABASE_URL's
 * server when set (the role needs CREATEDB), otherwise on an embedded
 * PostgreSQL under .slipway/schema (apart from `npm start`'s and the
 * tests'), and dropped afterwards.
 */
const log = createLogger(process.env.LOG_LEVEL ?? 'warn', 'schema');
const embedded = process.env.DATABASE_URL ? undefined : await EmbeddedDatabase.open(path.resolve('.slipway', 'schema'), log, 'postgres');
try {
  const database = await createFreshDatabase(process.env.DATABASE_URL ?? embedded!.url, log, { prefix: 'slipway_schema', poolSize: 1 });
  let dump: string;
  try {
    dump = await dumpSchema(database.pool);
  } finally {
    await database.drop();
  }
  const committed = await readFile(SCHEMA_FILE, 'utf8').catch(() => undefined);
  if (dump === committed) {
    console.log(`${SCHEMA_FILE}: up to date`);
  } else {
    await writeFile(SCHEMA_FILE, dump);
    console.log(`${SCHEMA_FILE}: rewritten`);
  }
} finally {
  await embedded?.stop();
}
