import { readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { expect, test } from 'vitest';
import type { TokenRole } from '../../migrations/schema.ts';
import { apiTestEnv } from '../api/support/apiTestEnv.ts';
import { simulatedBlueprint } from '../api/support/fixtures.ts';
import { closedPort } from '../helpers/deadEnds.ts';
import { CHECKOUT } from '../helpers/packedPackage.ts';
import { sourceModulesIn } from '../helpers/sourceModules.ts';
import { NOT_IN_REMOTE_MODE, NOT_IN_REMOTE_MODE_BUILT } from './notAtStartUp.ts';
import { CLI_RUNS_BUILD, parseJson, runCli, type CliRun } from './runCli.ts';
import { NO_SCHEDULED_COLLECTOR, rowCounts } from './rowCounts.ts';

/**
 * The CLI's remote mode: the real `slipway` binary with SLIPWAY_URL and
 * SLIPWAY_TOKEN, against a real API server (and a worker) on this file's
 * database, while its own DATABASE_URL points at a closed port, so every
 * answer it prints came through the API. Where a local run is possible it
 * runs too, and both outputs must be the same.
 */
const env = apiTestEnv({ worker: true, env: NO_SCHEDULED_COLLECTOR });

/** Nothing listens there: a remote run that touched the database would fail. */
const NO_DATABASE = 'postgres://nobody@127.0.0.1:1/nothing';
/** A well-formed token nobody issued. */
const UNKNOWN_TOKEN = `slw_${'x'.repeat(43)}`;

function remote(role: TokenRole | { token: string; url?: string }, ...args: string[]): Promise<CliRun> {
  const { token, url } = typeof role === 'string' ? { token: env.as[role].token!, url: undefined } : role;
  return runCli(args, NO_DATABASE, { SLIPWAY_URL: url ?? env.server.url, SLIPWAY_TOKEN: token }).then((run) => {
    // The token is a secret: never on the screen, whatever happened.
    expect(run.stdout + run.stderr).not.toContain(token);
    return run;
  });
}

function local(...args: string[]): Promise<CliRun> {
  return runCli(args, env.database.url);
}

function expectOneLineError(run: CliRun, exitCode: number, message: RegExp): void {
  expect(run.code, run.stderr).toBe(exitCode);
  expect(run.stdout).toBe('');
  expect(run.stderr).toMatch(/^error: [^\n]+\n$/);
  expect(run.stderr).toMatch(message);
}

async function remoteLease(role: TokenRole, blueprint: string): Promise<number> {
  const run = await remote(role, '--json', 'lease', 'create', '--blueprint', blueprint);
  expect(run.code, run.stderr).toBe(0);
  return parseJson(run).lease.id;
}

const leaseState = async (id: number) =>
  (await env.database.db.selectFrom('leases').select('state').where('id', '=', id).executeTakeFirstOrThrow()).state;

test('lease create waits through the API until the lease is active, printing what the local mode prints', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const run = await remote('user', 'lease', 'create', '--blueprint', name, '--reason', 'remote job');
  expect(run.stderr).toBe('');
  expect(run.code).toBe(0);
  const match = /^lease (\d+) requested for token:user \(command (\d+)\)$/m.exec(run.stdout);
  const id = Number(match?.[1]);
  expect(await leaseState(id)).toBe('active');
  // Progress from the settled tree, then the lease as the local mode renders it.
  expect(run.stdout).toMatch(/^#\d+ need_resource blueprint:\d+ → done/m);
  expect(run.stdout).toMatch(/^ +#\d+ grant lease:\d+ → done: acquired slot \d+ of resource \d+; active$/m);
  expect(run.stdout).toMatch(new RegExp(`^lease ${id}: active$`, 'm'));
  expect(run.stdout).toMatch(/holder\s+token:user/);
  const command = await env.database.db.selectFrom('commands').selectAll().where('id', '=', Number(match?.[2])).executeTakeFirstOrThrow();
  expect(command).toMatchObject({ kind: 'need_resource', issued_by: 'token:user', source: 'api', reason: 'remote job' });
});

test('lease release waits until the lease is destroyed; --no-wait answers at once', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const id = await remoteLease('user', name);
  const run = await remote('user', 'lease', 'release', String(id), '--reason', 'done');
  expect(run.stderr).toBe('');
  expect(run.code).toBe(0);
  expect(run.stdout).toMatch(new RegExp(`^release lease ${id}: queued as command \\d+$`, 'm'));
  expect(run.stdout).toMatch(new RegExp(`^lease ${id} is destroyed\\n$`, 'm'));
  expect(await leaseState(id)).toBe('destroyed');

  const other = await remoteLease('user', name);
  const queued = await remote('user', '--json', 'lease', 'release', String(other), '--no-wait');
  expect(queued.code, queued.stderr).toBe(0);
  const body = parseJson(queued);
  expect(body).toMatchObject({ coalesced: false, command: { kind: 'release', targetId: other, issuedBy: 'token:user' } });
  expect(body.outcome).toBeUndefined();
});

test('lease renew goes through the API as a renew command', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const id = await remoteLease('operator', name);
  const run = await remote('operator', '--json', 'lease', 'renew', String(id));
  expect(run.code, run.stderr).toBe(0);
  const body = parseJson(run);
  expect(body).toMatchObject({ outcome: 'settled', state: 'active', command: { kind: 'renew', status: 'done', issuedBy: 'token:operator' } });
});

test('show and list print the same text and JSON remotely as locally', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const kept = await remoteLease('operator', name);
  const released = await remoteLease('operator', name);
  const release = parseJson(await remote('operator', '--json', 'lease', 'release', String(released)));
  const commandId = String(release.command.id);

  const same = [
    ['lease', 'show', String(kept)],
    ['lease', 'show', String(released)],
    ['lease', 'list', '--blueprint', name],
    ['lease', 'list', '--holder', 'token:operator', '--state', 'active', '--limit', '1'],
    ['command', 'list', '--target', `lease:${released}`],
    ['command', 'show', commandId],
  ];
  for (const args of same) {
    for (const format of [[], ['--json']]) {
      const [there, here] = await Promise.all([remote('viewer', ...format, ...args), local(...format, ...args)]);
      expect(there.code, `${args.join(' ')}: ${there.stderr}`).toBe(0);
      expect(here.code, here.stderr).toBe(0);
      expect(there.stdout, args.join(' ')).toBe(here.stdout);
    }
  }
  // The pages really are pages, and the command really is the release.
  expect(parseJson(await remote('viewer', '--json', 'lease', 'list', '--holder', 'token:operator', '--limit', '1')).next).not.toBeNull();
  expect((await remote('viewer', 'command', 'show', commandId)).stdout).toMatch(
    new RegExp(`^command #${commandId} release lease:${released}: done`, 'm'),
  );
}, 400_000);

test('refusals exit with the codes and one-line messages of the local mode', async () => {
  const [there, here] = await Promise.all([remote('viewer', 'lease', 'show', '999999'), local('lease', 'show', '999999')]);
  expectOneLineError(there, 3, /lease 999999/);
  expect(there.stderr).toBe(here.stderr);

  const { name } = await simulatedBlueprint(env.as.admin);
  const id = await remoteLease('operator', name);
  expect((await remote('operator', 'lease', 'release', String(id))).code).toBe(0);
  const [again, againLocally] = await Promise.all([remote('operator', 'lease', 'release', String(id)), local('lease', 'release', String(id))]);
  expectOneLineError(again, 4, /destroyed/);
  expect(againLocally.code).toBe(4);

  // With --json the refusal is also the API's error object on stdout, the same in both modes.
  const [jsonThere, jsonHere] = await Promise.all([
    remote('operator', '--json', 'lease', 'release', String(id)),
    local('--json', 'lease', 'release', String(id)),
  ]);
  expect(jsonThere.code).toBe(4);
  expect(parseJson(jsonThere)).toMatchObject({ code: 'conflict', details: { state: 'destroyed', kind: 'release', settledBy: expect.any(Number) } });
  expect(parseJson(jsonHere)).toEqual(parseJson(jsonThere));
  const [missingThere, missingHere] = await Promise.all([
    remote('viewer', '--json', 'lease', 'show', '999999'),
    local('--json', 'lease', 'show', '999999'),
  ]);
  expect(missingThere.code).toBe(3);
  expect(parseJson(missingThere)).toEqual({ code: 'not_found', message: 'lease 999999 does not exist', details: { kind: 'lease', id: 999999 } });
  expect(missingHere.stdout).toBe(missingThere.stdout);
});

test('a viewer token is refused (403) with the refusal exit code, and nothing is written', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const id = await remoteLease('operator', name);
  const before = await rowCounts(env.database.db);
  expectOneLineError(await remote('viewer', 'lease', 'release', String(id)), 5, /viewer token may not/);
  expectOneLineError(await remote('viewer', 'lease', 'create', '--blueprint', name), 5, /viewer token may not/);
  expect(await rowCounts(env.database.db)).toEqual(before);
  expect(await leaseState(id)).toBe('active');
});

test('an unknown token is refused (401) with the refusal exit code', async () => {
  expectOneLineError(await remote({ token: UNKNOWN_TOKEN }, 'lease', 'list'), 5, /token/);
});

test('an unreachable server is one clear line', async () => {
  const port = await closedPort();
  const run = await remote({ token: UNKNOWN_TOKEN, url: `http://127.0.0.1:${port}` }, 'command', 'list');
  expectOneLineError(
    run,
    1,
    new RegExp(`^error: cannot reach the Slipway API at http://127\\.0\\.0\\.1:${port} \\(SLIPWAY_URL\\): ECONNREFUSED$`, 'm'),
  );
});

test('bad remote settings are usage errors that never echo the token', async () => {
  const notAToken = 'hunter2-secret-value';
  expectOneLineError(await remote({ token: notAToken }, 'lease', 'list'), 2, /SLIPWAY_TOKEN: must be an API token/);
  expectOneLineError(await remote({ token: UNKNOWN_TOKEN, url: 'ftp://example.com' }, 'lease', 'list'), 2, /SLIPWAY_URL: must be an http/);
  const noToken = await runCli(['lease', 'list'], NO_DATABASE, { SLIPWAY_URL: env.server.url });
  expectOneLineError(noToken, 2, /SLIPWAY_TOKEN: must be set when SLIPWAY_URL is/);
  // Options the API does not take are refused, not dropped.
  expectOneLineError(await remote('user', 'lease', 'create', '--blueprint', 'x', '--holder', 'bob'), 2, /--holder .* remote mode/);
});

test('lease create passes its expiry and heartbeat to the API', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const run = await remote('user', '--json', 'lease', 'create', '--blueprint', name, '--expires-in', '1h', '--heartbeat', '30s');
  expect(run.code, run.stderr).toBe(0);
  const { lease } = parseJson(run);
  expect(lease).toMatchObject({ state: 'active', termMs: 3_600_000, heartbeatMs: 30_000 });
  expect(new Date(lease.expiresAt).getTime()).toBeGreaterThan(Date.now() + 3_500_000);
});

test("a wait that outlasts the API's 60 s goes on until the CLI's --timeout; a shorter one times out like locally", async () => {
  const { name } = await simulatedBlueprint(env.as.admin, { operationLatencyMs: { releaseLease: 63_000 } });
  const slow = await remoteLease('operator', name);
  const run = await remote('operator', 'lease', 'release', String(slow), '--timeout', '150');
  expect(run.code, run.stderr).toBe(0);
  expect(run.stdout).toMatch(new RegExp(`^lease ${slow} is destroyed$`, 'm'));
  expect(await leaseState(slow)).toBe('destroyed');

  const other = await remoteLease('operator', name);
  const short = await remote('operator', 'lease', 'release', String(other), '--timeout', '1');
  expectOneLineError({ ...short, stdout: '' }, 1, /^error: timed out after 1s; command (\d+) carries on/);
  expect(short.stdout).toMatch(new RegExp(`^lease ${other} is active$`, 'm'));
}, 300_000);

test('a subcommand with no remote mode refuses when SLIPWAY_URL is set, unless given --local', async () => {
  const name = `remote-refused-${Date.now()}`;
  const args = ['blueprint', 'create', '--name', name, '--driver', 'simulated', '--max-resources', '1'];
  const blueprints = async () => (await env.database.db.selectFrom('blueprints').select('id').where('name', '=', name).execute()).length;
  const withUrl = { SLIPWAY_URL: env.server.url, SLIPWAY_TOKEN: env.as.admin.token! };

  const refused = await runCli(args, env.database.url, withUrl);
  expectOneLineError(refused, 2, /`slipway blueprint create` works on the database directly .* SLIPWAY_URL .* --local/);
  expect(await blueprints()).toBe(0);

  const confirmed = await runCli(['--local', ...args], env.database.url, withUrl);
  expect(confirmed.code, confirmed.stderr).toBe(0);
  expect(await blueprints()).toBe(1);
  // Without SLIPWAY_URL nothing changes.
  expect((await runCli(['blueprint', 'show', name], env.database.url)).code).toBe(0);
});

test('a remote call loads the HTTP client, never the database code, the queue, the drivers or the metrics', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const id = await remoteLease('user', name);
  const recorder = pathToFileURL(path.join(path.dirname(fileURLToPath(import.meta.url)), 'recordModules.mjs')).href;
  const record = path.join(os.tmpdir(), `slipway-remote-modules-${process.pid}.txt`);
  try {
    const run = await runCli(['lease', 'show', String(id)], NO_DATABASE, {
      SLIPWAY_URL: env.server.url,
      SLIPWAY_TOKEN: env.as.user.token!,
      NODE_OPTIONS: `--import ${recorder}`,
      RECORD_MODULES_TO: record,
    });
    expect(run.code, run.stderr).toBe(0);
    const files = sourceModulesIn((await readFile(record, 'utf8')).split('\n').filter(Boolean), CHECKOUT);
    expect(files.some((file) => file.endsWith('/src/client/SlipwayClient.ts'))).toBe(true);
    const shunned = (file: string) =>
      (CLI_RUNS_BUILD && NOT_IN_REMOTE_MODE_BUILT.test(file)) || NOT_IN_REMOTE_MODE.some((pattern) => pattern.test(file));
    expect(files.filter(shunned)).toEqual([]);
  } finally {
    await rm(record, { force: true });
  }
});

test('lease explain and lease create --dry-run answer through the API as locally', async () => {
  const { name } = await simulatedBlueprint(env.as.admin, {}, { maxResources: 1, leasesPerResource: 1 });
  const kept = await remoteLease('operator', name);
  const explained = await remote('viewer', '--json', 'lease', 'explain', String(kept));
  expect(explained.code, explained.stderr).toBe(0);
  expect(explained.stdout).toBe((await local('--json', 'lease', 'explain', String(kept))).stdout);
  expect(parseJson(explained)).toMatchObject({ lease: kept, state: 'active', grantedNow: false, blueprints: [] });

  const before = await rowCounts(env.database.db);
  const dry = await remote('operator', 'lease', 'create', '--blueprint', name, '--dry-run');
  expect(dry.code, dry.stderr).toBe(0);
  expect(dry.stdout).toMatch(new RegExp(`^the request would not be granted now: ${name}: blueprint ${name} is at its limit`));
  expect(dry.stdout).toContain(`→ blueprint ${name}'s max resources at 2 (it is 1) would grant it`);
  expect(await rowCounts(env.database.db)).toEqual(before);
  await remote('operator', 'lease', 'release', String(kept));
});
