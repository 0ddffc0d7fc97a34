import { createHash } from 'node:crypto';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { applyFunctions, functionName } from '../../src/db/applyFunctions.ts';
import type { FreshDatabase } from '../../src/db/freshDatabase.ts';
import { FUNCTION_DEFINITIONS } from '../../src/db/functions/index.ts';
import { migrate } from '../../src/db/migrate.ts';
import { migrations } from '../../migrations/index.ts';
import { createTestDatabase, testLog } from '../helpers/testDatabase.ts';

/**
 * The functions' texts (their SHA-256) as of the migration that came with
 * their last change. A release that changes a function adds a migration
 * too, even one with nothing else to do: its workers refuse a schema behind
 * theirs, so they wait for the `db migrate` that replaces the function
 * (docs/upgrades.md, "SQL functions").
 */
const FUNCTIONS_AS_OF = { migration: '0040_sooner_coalesced_commands', sha256: '7f0b9e735f614a85828a97ee66f022425e24a3778f2835b21bb6ea7a6363cce0' };

const FUNCTIONS_DIR = path.resolve(import.meta.dirname, '../../src/db/functions');

let database: FreshDatabase;
beforeAll(async () => {
  database = await createTestDatabase({ poolSize: 3 });
});
afterAll(() => database.drop());

/** The database's functions as pg_get_functiondef prints them, every name schema-qualified, in name order. */
async function liveDefinitions(): Promise<string[]> {
  const client = await database.pool.connect();
  try {
    await client.query('begin; set local search_path = pg_catalog');
    const { rows } = await client.query<{ definition: string }>(`
      select rtrim(pg_get_functiondef(p.oid), E'\\n') as definition
        from pg_proc p
       where p.pronamespace = 'public'::regnamespace and p.prokind in ('f', 'p')
       order by p.proname, pg_get_function_identity_arguments(p.oid)`);
    return rows.map((r) => r.definition);
  } finally {
    await client.query('rollback');
    client.release();
  }
}

const fileOf = (name: string) => FUNCTION_DEFINITIONS.find((d) => functionName(d) === name) ?? '';

/** A definition of `name` with other text than its file's, as an older release would have left it. */
const older = (name: string) => fileOf(name).replace('AS $function$', 'AS $function$\n-- as an older release wrote it\n');

test('every live function of a migrated database has one file in src/db/functions/, named for it and holding its definition', async () => {
  const names = FUNCTION_DEFINITIONS.map(functionName);
  const files = readdirSync(FUNCTIONS_DIR).filter((f) => f !== 'index.ts');
  expect(files.sort()).toEqual(names.map((n) => `${n}.ts`).sort());
  expect(new Set(names).size).toBe(names.length);
  expect(await liveDefinitions()).toEqual([...FUNCTION_DEFINITIONS].sort((a, b) => functionName(a).localeCompare(functionName(b))));
});

test('migrate gives an upgraded database the text of each file whose function it holds otherwise, and leaves a current one alone', async () => {
  await database.pool.query(older('slipway_expect'));
  await database.pool.query(older('object_drain_job_key'));
  expect(await liveDefinitions()).not.toContain(fileOf('slipway_expect'));

  expect(await migrate(database, testLog)).toEqual(['function object_drain_job_key', 'function slipway_expect']);
  expect(await liveDefinitions()).toEqual(expect.arrayContaining([fileOf('slipway_expect'), fileOf('object_drain_job_key')]));
  expect(await migrate(database, testLog)).toEqual([]);
});

test('processes that migrate at once replace a changed function once, one after the other', async () => {
  await database.pool.query(older('slipway_wake_objects'));
  const answers = await Promise.all([migrate(database, testLog), migrate(database, testLog)]);
  expect(answers.flat()).toEqual(['function slipway_wake_objects']);
  expect(await liveDefinitions()).toContain(fileOf('slipway_wake_objects'));
});

test('a definition that changes a function’s arguments is refused, and nothing the step did before it stays', async () => {
  await database.pool.query(older('slipway_expect'));
  const before = await liveDefinitions();
  const newArguments = fileOf('object_drain_job_key').replace('(kind text, id bigint)', '(kind text, id integer)');
  await expect(applyFunctions(database.db, [fileOf('slipway_expect'), newArguments])).rejects.toThrow(
    /object_drain_job_key\.ts changes the arguments of object_drain_job_key.*a name \(and file\) of its own/,
  );
  expect(await liveDefinitions()).toEqual(before);
  const { rows } = await sql<{ n: number }>`select count(*)::int as n from pg_proc where proname = 'object_drain_job_key'`.execute(database.db);
  expect(rows[0]?.n).toBe(1);
  await migrate(database, testLog);
});

test('a definition in another form than pg_get_functiondef prints is refused by name', () => {
  expect(() => functionName('create function public.x() returns int language sql as $$ select 1 $$')).toThrow(
    /must start "CREATE OR REPLACE FUNCTION public.<name>\("/,
  );
});

test('a change to a function comes with a migration, so that workers of its release wait for db migrate', () => {
  const latest = Object.keys(migrations).sort().at(-1);
  const sha256 = createHash('sha256').update(FUNCTION_DEFINITIONS.join('\n')).digest('hex');
  const hint =
    latest === FUNCTIONS_AS_OF.migration
      ? `a function changed since migration ${latest}: add a migration for the change (it may hold nothing else), then set FUNCTIONS_AS_OF to { migration: '<its name>', sha256: '${sha256}' }`
      : `a function changed: if ${latest} is this change's own migration (not one a release before shipped), set FUNCTIONS_AS_OF to { migration: '${latest}', sha256: '${sha256}' }; else add one`;
  expect(sha256, hint).toBe(FUNCTIONS_AS_OF.sha256);
  expect(Object.keys(migrations)).toContain(FUNCTIONS_AS_OF.migration);
});
