import { readFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { migrations } from '../../migrations/index.ts';
import { functionName } from '../../src/db/applyFunctions.ts';
import { Database } from '../../src/db/Database.ts';
import { FUNCTION_DEFINITIONS } from '../../src/db/functions/index.ts';
import { slipwayVersion } from '../../src/version.ts';
import { CHECKOUT } from '../helpers/packedPackage.ts';
import { testLog } from '../helpers/testDatabase.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { createEmptyDatabase } from './emptyDatabase.ts';
import { CLI_RUNS_BUILD, finished, parseJson, runCli, spawnCli } from './runCli.ts';

// Every migration, in order: the list grows as migrations are added.
const ALL_MIGRATIONS = Object.keys(migrations).join(', ');

let empty: Awaited<ReturnType<typeof createEmptyDatabase>>;
let database: Database;

beforeAll(async () => {
  empty = await createEmptyDatabase();
  database = Database.fromUrl(empty.url, testLog);
});
afterAll(async () => {
  await database?.close();
  await empty?.drop();
});

test('worker refuses to run on a database without the schema, naming the fix', async () => {
  const run = await runCli(['worker'], empty.url);
  expect(run.code).toBe(1);
  expect(run.stderr).toBe(`error: the database schema is not up to date (${ALL_MIGRATIONS} not applied): run \`slipway db migrate\`\n`);
});

test('a command on a database without the schema names the fix instead of a missing relation', async () => {
  const run = await runCli(['lease', 'list'], empty.url);
  expect(run.code).toBe(1);
  expect(run.stderr).toBe(
    'error: the database has no Slipway schema (relation "leases" does not exist): run `slipway db migrate`, or `npm start`, which migrates\n',
  );
  const json = await runCli(['--json', 'blueprint', 'list'], empty.url);
  expect(json.code).toBe(1);
  expect(parseJson(json)).toMatchObject({ code: 'schema_missing', message: expect.stringContaining('slipway db migrate') });
});

test('db status on a database without the schema names every migration and function it lacks', async () => {
  const run = await runCli(['--json', 'db', 'status'], empty.url);
  expect(run.code).toBe(1);
  expect(parseJson(run)).toMatchObject({
    code: 'not_up_to_date',
    message: expect.stringContaining('run `slipway db migrate`'),
    details: { pendingMigrations: Object.keys(migrations), laterMigrations: [], outdatedFunctions: FUNCTION_DEFINITIONS.map(functionName) },
  });
});

test('db migrate applies the migrations once', async () => {
  const first = await runCli(['db', 'migrate'], empty.url);
  expect(first.code).toBe(0);
  // Then each function whose file changed since the migration that wrote it (docs/upgrades.md, "SQL functions").
  expect(first.stdout).toMatch(new RegExp(`^PostgreSQL at postgres@[\\d.]+:\\d+/slipway_cli_\\w+: applied ${ALL_MIGRATIONS}(, function \\w+)*\n$`));
  const second = parseJson(await runCli(['--json', 'db', 'migrate'], empty.url));
  expect(second.applied).toEqual([]);
});

test('db status names a function changed by hand, and what to run; after db migrate it is up to date', async () => {
  const definition = FUNCTION_DEFINITIONS.find((d) => functionName(d) === 'slipway_expect') ?? '';
  await database.pool.query(definition.replace('AS $function$', 'AS $function$\n-- changed by hand\n'));
  const behind = await runCli(['db', 'status'], empty.url);
  expect(behind.code).toBe(1);
  expect(behind.stdout).toBe('');
  expect(behind.stderr).toMatch(
    /^error: PostgreSQL at postgres@[\d.]+:\d+\/slipway_cli_\w+ is not up to date \(functions slipway_expect differ from this release's\): run `slipway db migrate`\n$/,
  );
  const json = await runCli(['--json', 'db', 'status'], empty.url);
  expect(json.code).toBe(1);
  expect(parseJson(json)).toMatchObject({ code: 'not_up_to_date', details: { pendingMigrations: [], outdatedFunctions: ['slipway_expect'] } });

  expect((await runCli(['db', 'migrate'], empty.url)).stdout).toMatch(/: applied function slipway_expect\n$/);
  const current = await runCli(['db', 'status'], empty.url);
  expect(current.code).toBe(0);
  expect(current.stdout).toMatch(/^PostgreSQL at postgres@[\d.]+:\d+\/slipway_cli_\w+: up to date\n$/);
  expect(parseJson(await runCli(['--json', 'db', 'status'], empty.url))).toMatchObject({
    pendingMigrations: [],
    laterMigrations: [],
    outdatedFunctions: [],
  });
});

test('db status of a release before reports a later release’s schema, whose functions it does not compare, and exits 0', async () => {
  const definition = FUNCTION_DEFINITIONS.find((d) => functionName(d) === 'slipway_expect') ?? '';
  await database.pool.query(definition.replace('AS $function$', 'AS $function$\n-- as a later release wrote it\n'));
  await database.pool.query(`insert into kysely_migration (name, timestamp) values ('9999_later_release', now()::text)`);
  try {
    const run = await runCli(['db', 'status'], empty.url);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/: a later release's schema \(9999_later_release applied, unknown to this one\)\n$/);
    expect(parseJson(await runCli(['--json', 'db', 'status'], empty.url))).toMatchObject({
      pendingMigrations: [],
      laterMigrations: ['9999_later_release'],
      outdatedFunctions: null,
    });
  } finally {
    await database.pool.query(`delete from kysely_migration where name = '9999_later_release'`);
    await database.pool.query(definition);
  }
});

test('start runs a worker that serves leases until SIGTERM, then stops cleanly', async () => {
  const start = spawnCli(['start'], empty.url);
  const output = finished(start);
  let stdout = '';
  start.stdout!.on('data', (chunk) => (stdout += chunk));
  await waitFor('start to report its worker', async () => stdout.includes('running'));
  // Where the database is, without its password.
  const password = decodeURIComponent(new URL(empty.url).password);
  expect(stdout).toMatch(/^database: PostgreSQL at postgres@[\d.]+:\d+\/slipway_cli_\w+\nmigrations: up to date\nworker \S+ running/);
  // No "user:secret@" anywhere; and where the server has a password (the
  // embedded one does; a trust-auth server does not), not the password either.
  expect(stdout).not.toMatch(/postgres:[^@\s]*@/);
  if (password !== '') expect(stdout).not.toContain(password);
  // The registry says which version each worker runs (a rolling upgrade's progress): the one its `slipway --version` prints.
  const version = (await runCli(['--version'], undefined)).stdout.trim();
  expect(await database.db.selectFrom('workers').select('version').execute()).toEqual([{ version }]);

  expect((await runCli(['blueprint', 'create', '--name', 'sim', '--driver', 'simulated', '--max-resources', '1'], empty.url)).code).toBe(0);
  const lease = await runCli(['--json', 'lease', 'create', '--blueprint', 'sim', '--timeout', '30'], empty.url);
  expect(lease.code, lease.stderr).toBe(0);
  expect(parseJson(lease).lease.state).toBe('active');

  start.kill('SIGTERM');
  const stopped = await output;
  expect(stopped.code).toBe(0);
  expect(stopped.stdout).toMatch(/stopping worker \S+ \(SIGTERM\): finishing drains in progress\nworker stopped\n$/);
  expect(await database.db.selectFrom('workers').select('id').execute()).toEqual([]);
});

test('--version prints the package version and the commit, and exits 0', async () => {
  const run = await runCli(['--version'], undefined);
  expect(run.code).toBe(0);
  const { version } = JSON.parse(readFileSync(path.join(CHECKOUT, 'package.json'), 'utf8'));
  // The source names the checkout's commit; the build, the commit it was built from.
  const expected = CLI_RUNS_BUILD
    ? `${version}+${JSON.parse(readFileSync(path.join(CHECKOUT, 'dist', 'build.json'), 'utf8')).commit}`
    : slipwayVersion();
  expect(run.stdout).toBe(`${expected}\n`);
  expect(slipwayVersion().split('+')[0]).toBe(version);
});

test('db url prints the URL of the database, which connects', async () => {
  const run = await runCli(['db', 'url'], empty.url);
  expect(run.code).toBe(0);
  expect(run.stderr).toBe('');
  expect(run.stdout).toBe(`${empty.url}\n`);
  const client = new pg.Client({ connectionString: run.stdout.trim() });
  await client.connect();
  expect((await client.query('select current_database() as name')).rows[0].name).toBe(new URL(empty.url).pathname.slice(1));
  await client.end();
});
