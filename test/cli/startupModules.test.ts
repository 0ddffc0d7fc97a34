import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createTestDatabase } from '../helpers/testDatabase.ts';
import { runCli } from './runCli.ts';

/**
 * A `slipway` call loads what its subcommand runs and no more (see
 * docs/cli.md, "Start-up time"): the code of other subcommands is loaded
 * when they call it. Each call here runs with test/cli/recordModules.mjs,
 * which lists every file the process loaded.
 */
const RECORDER = pathToFileURL(path.join(path.dirname(fileURLToPath(import.meta.url)), 'recordModules.mjs')).href;

/** What only `start`, `worker`, `api`, `db migrate`, `gc`, the subcommands that change or wait, and remote mode load. */
const NOT_AT_START_UP: readonly RegExp[] = [
  /\/node_modules\/(fastify|graphile-worker|prom-client|@opentelemetry\/api)\//,
  /\/migrations\/\d{4}_\w+\.ts$/,
  /\/src\/(api\/server|worker\/SlipwayWorker|gc\/|metrics\/|client\/|queue\/appendCommand|read\/waitForSettled|drain\/handlers\/)/,
];

let database: Awaited<ReturnType<typeof createTestDatabase>>;
let dir: string;
beforeAll(async () => {
  database = await createTestDatabase();
  dir = await mkdtemp(path.join(os.tmpdir(), 'slipway-modules-'));
});
afterAll(async () => {
  await database?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function filesLoadedBy(...args: string[]): Promise<string[]> {
  const record = path.join(dir, `${args.join('-').replace(/\W/g, '_')}.txt`);
  const run = await runCli(args, database.url, { NODE_OPTIONS: `--import ${RECORDER}`, RECORD_MODULES_TO: record });
  expect(run.code, run.stderr).toBe(0);
  return (await readFile(record, 'utf8')).split('\n').filter(Boolean);
}

test.each([[['--help']], [['lease', 'list']], [['command', 'list', '--json']]])(
  'slipway %j loads no service, migration, collector, metrics, waiting or HTTP client code',
  async (args) => {
    const files = await filesLoadedBy(...args);
    // The recorder saw the CLI load: its entry point and the database code.
    expect(files.some((file) => file.endsWith('/src/cli/main.ts'))).toBe(true);
    expect(files.filter((file) => NOT_AT_START_UP.some((pattern) => pattern.test(file)))).toEqual([]);
  },
);
