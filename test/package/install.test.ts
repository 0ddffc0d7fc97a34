import { spawn } from 'node:child_process';
import { chmod, mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { NOT_AT_START_UP, NOT_FOR_VERSION, NOT_IN_REMOTE_MODE, NOT_IN_REMOTE_MODE_BUILT } from '../cli/notAtStartUp.ts';
import { finished, type CliRun } from '../cli/runCli.ts';
import { CHECKOUT, installPackedPackage, userEnv } from '../helpers/packedPackage.ts';
import { sourceModulesIn } from '../helpers/sourceModules.ts';
import { waitFor } from '../helpers/waitFor.ts';

/**
 * The package as a user gets it: `npm pack`'s tarball, installed with
 * `npm install -g` into a prefix of its own, run from a directory outside any
 * checkout with its data under SLIPWAY_HOME (docs/decisions/0033-compiled-package.md).
 * Run by `npm run test:package` (in .ci/run), not `npm test`: packing builds,
 * and installing reads the npm registry (or npm's cache).
 */
const RECORDER = pathToFileURL(path.join(CHECKOUT, 'test', 'cli', 'recordModules.mjs')).href;

let dir: string;
let prefix: string;
let home: string;
let installed: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'slipway-package-'));
  // Readable by all, like a system's prefix: run as root, the embedded PostgreSQL runs as the postgres user.
  await chmod(dir, 0o755);
  home = path.join(dir, 'home');
  ({ prefix, packageDir: installed } = await installPackedPackage(dir));
}, 600_000);

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
}, 60_000);

test('the package holds the compiled JavaScript and no TypeScript source; no TypeScript tool is installed with it', async () => {
  const files = (await readdir(installed, { recursive: true })).filter((file) => !file.startsWith('node_modules'));
  expect(files).toContain(path.join('dist', 'src', 'cli', 'main.js'));
  expect(files).toContain(path.join('dist', 'src', 'web', 'assets', 'app.css'));
  expect(files.filter((file) => file.endsWith('.ts') && !file.endsWith('.d.ts'))).toEqual([]);
  for (const tool of ['tsx', 'typescript', 'esbuild']) expect(existsSync(path.join(installed, 'node_modules', tool)), tool).toBe(false);
});

test('slipway is on the PATH of the prefix and prints the version of the package it was packed from', async () => {
  const { version } = JSON.parse(await readFile(path.join(CHECKOUT, 'package.json'), 'utf8')) as { version: string };
  const cli = await slipwayRun(['--version']);
  expect(cli.code, cli.stderr).toBe(0);
  expect(cli.stdout).toMatch(new RegExp(`^${version.replaceAll('.', '\\.')}(\\+[0-9a-f]{12})?\\n$`));
  expect(cli.stderr).toBe('');
});

test('the installed CLI loads only JavaScript from its own package: no TypeScript, no tsx, and nothing its subcommand does not run', async () => {
  const help = await filesLoadedBy(['--help']);
  expect(help.filter((file) => file.endsWith('.ts') || file.includes('/tsx/'))).toEqual([]);
  expect(help.filter((file) => !file.startsWith(`${installed}/`) && file !== fileURLToPath(RECORDER))).toEqual([]);
  const helpModules = modulesIn(help);
  // The recorder saw the compiled CLI load.
  expect(helpModules).toContain(path.join(installed, 'src', 'cli', 'run.ts'));
  expect(helpModules.filter((file) => NOT_AT_START_UP.some((pattern) => pattern.test(file)))).toEqual([]);

  const version = modulesIn(await filesLoadedBy(['--version']));
  expect(version).toContain(path.join(installed, 'src', 'version.ts'));
  expect(version.filter((file) => file.endsWith('/src/cli/run.ts') || NOT_FOR_VERSION.test(file))).toEqual([]);
});

test('slipway start runs from any directory with its data under SLIPWAY_HOME, and lease run holds a lease for a command', async () => {
  const cwd = path.join(dir, 'elsewhere');
  await mkdir(cwd);
  const start = spawn('slipway', ['start'], { cwd, env: slipwayEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  const output = finished(start);
  let stdout = '';
  start.stdout!.on('data', (chunk) => (stdout += chunk));
  try {
    const url = await waitFor('slipway start to serve its API', async () => /^HTTP API on (\S+) /m.exec(stdout)?.[1], 120_000);
    await waitFor('/readyz to answer', async () => (await fetch(`${url}/readyz`)).ok);
    expect(existsSync(path.join(home, 'pg', 'PG_VERSION'))).toBe(true);
    expect(existsSync(path.join(home, 'admin-token'))).toBe(true);
    // The web UI's assets are read from beside the compiled modules.
    expect((await fetch(`${url}/assets/app.css`)).status).toBe(200);

    const sandboxes = path.join(dir, 'sandboxes');
    const blueprint = await slipwayRun(
      ['blueprint', 'create', '--name', 'sandboxes', '--driver', 'directory', '--setting', `root=${sandboxes}`, '--max-resources', '1'],
      {},
      cwd,
    );
    expect(blueprint.code, blueprint.stderr).toBe(0);

    // A lease for exactly as long as a command runs, in remote mode, as CI jobs call it.
    const token = JSON.parse((await slipwayRun(['--json', 'token', 'create', '--name', 'package-test', '--role', 'user'], {}, cwd)).stdout).secret;
    const remoteEnv = { SLIPWAY_URL: url, SLIPWAY_TOKEN: token };
    const ran = await slipwayRun(
      ['lease', 'run', '--blueprint', 'sandboxes', '--', 'sh', '-c', 'test -d "$SLIPWAY_ATTR_PATH" && echo "$SLIPWAY_LEASE_ID $SLIPWAY_ATTR_PATH"'],
      remoteEnv,
      cwd,
    );
    expect(ran.code, ran.stderr).toBe(0);
    const [leaseId, leasePath] = ran.stdout.trim().split(' ') as [string, string];
    expect(leasePath.startsWith(sandboxes)).toBe(true);
    expect(ran.stderr).toMatch(new RegExp(`lease ${leaseId} released: the command exited with status 0`));
    await waitFor('the lease to be destroyed and its directory removed', async () => !existsSync(leasePath));
    // The build loads no database code and none of the packages only that needs.
    const remote = modulesIn(await filesLoadedBy(['lease', 'show', leaseId], remoteEnv));
    expect(remote).toContain(path.join(installed, 'src', 'client', 'SlipwayClient.ts'));
    expect(remote.filter((file) => NOT_IN_REMOTE_MODE_BUILT.test(file) || NOT_IN_REMOTE_MODE.some((pattern) => pattern.test(file)))).toEqual([]);
  } finally {
    start.kill('SIGTERM');
  }
  const stopped = await output;
  expect(stopped.code, stopped.stderr).toBe(0);
  expect(stopped.stdout).toMatch(/\nworker stopped\n$/);
}, 300_000);

/** Every file the installed `slipway <args>` loads (test/cli/recordModules.mjs). */
async function filesLoadedBy(args: string[], extra: Record<string, string> = {}): Promise<string[]> {
  const record = path.join(dir, `modules${args.join('-').replace(/\W/g, '_')}.txt`);
  const cli = await slipwayRun(args, { ...extra, NODE_OPTIONS: `--import ${RECORDER}`, RECORD_MODULES_TO: record });
  expect(cli.code, cli.stderr).toBe(0);
  return (await readFile(record, 'utf8')).split('\n').filter(Boolean);
}

/** The source modules behind the files the installed package's call loaded. */
function modulesIn(files: string[]): string[] {
  return sourceModulesIn(files, installed);
}

function slipwayEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    ...userEnv(),
    PATH: `${path.join(prefix, 'bin')}:${process.env.PATH}`,
    SLIPWAY_HOME: home,
    SLIPWAY_API_PORT: '0',
    LOG_LEVEL: 'warn',
    ...extra,
  };
}

/** Runs the installed `slipway` (by name, from the prefix's bin on the PATH) to completion. */
function slipwayRun(args: string[], extra: Record<string, string> = {}, cwd = dir): Promise<CliRun> {
  return finished(spawn('slipway', args, { cwd, env: slipwayEnv(extra), stdio: ['ignore', 'pipe', 'pipe'] }));
}
