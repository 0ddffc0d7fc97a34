import { readFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { migrations } from '../../migrations/index.ts';
import { Database } from '../../src/db/Database.ts';
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

test('db migrate applies the migrations once', async () => {
  const first = await runCli(['db', 'migrate'], empty.url);
  expect(first.code).toBe(0);
  expect(first.stdout).toMatch(new RegExp(`^PostgreSQL at postgres@[\\d.]+:\\d+/slipway_cli_\\w+: applied ${ALL_MIGRATIONS}\n$`));
  const second = parseJson(await runCli(['--json', 'db', 'migrate'], empty.url));
  expect(second.applied).toEqual([]);
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
