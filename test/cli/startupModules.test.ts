import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createTestDatabase } from '../helpers/testDatabase.ts';
import { NOT_AT_START_UP, NOT_FOR_VERSION } from './notAtStartUp.ts';
import { CHECKOUT } from '../helpers/packedPackage.ts';
import { sourceModulesIn } from '../helpers/sourceModules.ts';
import { runCli } from './runCli.ts';

/**
 * A `slipway` call loads what its subcommand runs and no more (see
 * docs/cli.md, "Start-up time"): the code of other subcommands is loaded
 * when they call it. Each call here runs with test/cli/recordModules.mjs,
 * which lists every file the process loaded.
 */
const RECORDER = pathToFileURL(path.join(path.dirname(fileURLToPath(import.meta.url)), 'recordModules.mjs')).href;

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
  return sourceModulesIn((await readFile(record, 'utf8')).split('\n').filter(Boolean), CHECKOUT);
}

test.each([[['--help']], [['lease', 'list']], [['command', 'list', '--json']]])(
  'slipway %j loads no service, migration, collector, metrics, waiting or HTTP client code',
  async (args) => {
    const files = await filesLoadedBy(...args);
    // The recorder saw the CLI load: the module that builds the program and runs it.
    expect(files.some((file) => file.endsWith('/src/cli/run.ts'))).toBe(true);
    expect(files.filter((file) => NOT_AT_START_UP.some((pattern) => pattern.test(file)))).toEqual([]);
  },
);

test('slipway --version loads neither the program nor the packages every other call needs', async () => {
  const files = await filesLoadedBy('--version');
  expect(files.some((file) => file.endsWith('/src/version.ts'))).toBe(true);
  expect(files.filter((file) => file.endsWith('/src/cli/run.ts') || NOT_FOR_VERSION.test(file))).toEqual([]);
});

test('a call declares only the group of subcommands it names: lease list loads no other group', async () => {
  const files = await filesLoadedBy('lease', 'list');
  expect(files.some((file) => file.endsWith('/src/cli/commands/leaseCommands.ts'))).toBe(true);
  expect(files.filter((file) => /\/src\/cli\/commands\/(?!lease)\w+Commands\.ts$/.test(file))).toEqual([]);
  // --help lists every group, so it declares them all.
  expect((await filesLoadedBy('--help')).filter((file) => /\/src\/cli\/commands\/\w+Commands\.ts$/.test(file)).length).toBeGreaterThan(5);
});
