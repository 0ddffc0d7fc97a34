import { expect, test } from 'vitest';
import type { TokenRole } from '../../migrations/schema.ts';
import { apiTestEnv } from '../api/support/apiTestEnv.ts';
import { activeLease, simulatedBlueprint } from '../api/support/fixtures.ts';
import { NO_SCHEDULED_COLLECTOR, rowCounts } from './rowCounts.ts';
import { parseJson, runCli, type CliRun } from './runCli.ts';

/**
 * `slipway command cancel`, the CLI's POST /v1/commands/{id}/cancel: on the
 * database, and through the API (SLIPWAY_URL) with its DATABASE_URL on a
 * closed port, against a real API server and worker on this file's database.
 */
const env = apiTestEnv({ worker: true, env: NO_SCHEDULED_COLLECTOR });

/** Nothing listens there: a remote run that touched the database would fail. */
const NO_DATABASE = 'postgres://nobody@127.0.0.1:1/nothing';

function local(...args: string[]): Promise<CliRun> {
  return runCli(args, env.database.url);
}

function remote(role: TokenRole, ...args: string[]): Promise<CliRun> {
  return runCli(args, NO_DATABASE, { SLIPWAY_URL: env.server.url, SLIPWAY_TOKEN: env.as[role].token! });
}

const commandRow = (id: number) => env.database.db.selectFrom('commands').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

/** Queues a release of `lease` from the local CLI, returning its command id (it stays queued while no worker runs). */
async function queuedRelease(lease: number): Promise<number> {
  const run = await local('--json', 'lease', 'release', String(lease), '--no-wait');
  expect(run.code, run.stderr).toBe(0);
  const { command } = parseJson(run);
  expect(command.status).toBe('queued');
  return command.id;
}

test('command cancel cancels a queued command, locally and through the API, and it is never applied', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const [first, second] = [await activeLease(env.as.operator, name), await activeLease(env.as.operator, name)];

  await env.stopWorker();
  let here: number;
  let there: number;
  try {
    here = await queuedRelease(first.id);
    there = await queuedRelease(second.id);

    const cancelled = await local('command', 'cancel', String(here), '--reason', 'changed my mind');
    expect(cancelled.stderr).toBe('');
    expect(cancelled.code).toBe(0);
    expect(cancelled.stdout).toBe(`cancelled command #${here} release lease:${first.id}\n`);
    expect(await commandRow(here)).toMatchObject({ status: 'cancelled', message: expect.stringMatching(/^cancelled by \S+@\S+: changed my mind$/) });

    // Through the API, --json prints the API's answer: the command as GET /v1/commands/{id} then shows it.
    const answer = await remote('operator', '--json', 'command', 'cancel', String(there), '--reason', 'not needed');
    expect(answer.code, answer.stderr).toBe(0);
    const body = parseJson(answer);
    expect(body).toEqual({ command: (await env.as.viewer.get(`/v1/commands/${there}`)).body.command });
    expect(body.command).toMatchObject({ id: there, status: 'cancelled', message: 'cancelled by token:operator: not needed' });
  } finally {
    await env.startWorker();
  }

  // Each cancel is on its lease's timeline, with who asked and from where.
  const events = await env.database.db
    .selectFrom('events')
    .select(['target_id', 'source', 'message'])
    .where('type', '=', 'command_cancelled')
    .where('target_id', 'in', [first.id, second.id])
    .orderBy('id')
    .execute();
  expect(events).toEqual([
    { target_id: first.id, source: 'cli', message: `release (command ${here}) cancelled: changed my mind` },
    { target_id: second.id, source: 'api', message: `release (command ${there}) cancelled: not needed` },
  ]);
  // The worker is back and drains both leases (a renew waits for it): the cancelled releases never ran.
  for (const lease of [first, second]) {
    const renewed = await local('--json', 'lease', 'renew', String(lease.id));
    expect(renewed.code, renewed.stderr).toBe(0);
    expect(parseJson(renewed).state).toBe('active');
  }
  expect((await commandRow(here)).status).toBe('cancelled');
  expect((await commandRow(there)).status).toBe('cancelled');
});

test('an unknown id exits 3 and a command not queued exits 4 with the API error, the same in both modes, and nothing is written', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const lease = await activeLease(env.as.operator, name);
  const release = parseJson(await local('--json', 'lease', 'release', String(lease.id)));
  expect(release.command.status).toBe('done');
  const grant = (await env.as.viewer.get(`/v1/commands?target=lease:${lease.id}&kind=grant`)).body.items[0].id;
  const before = await rowCounts(env.database.db);

  const missing = await Promise.all([local('command', 'cancel', '999999'), remote('operator', 'command', 'cancel', '999999')]);
  for (const run of missing) expect(run).toEqual({ code: 3, stdout: '', stderr: 'error: command 999999 does not exist\n' });
  const missingJson = await Promise.all([
    local('--json', 'command', 'cancel', '999999'),
    remote('operator', '--json', 'command', 'cancel', '999999'),
  ]);
  for (const run of missingJson) {
    expect(run.code).toBe(3);
    expect(parseJson(run)).toEqual({ code: 'not_found', message: 'command 999999 does not exist', details: { kind: 'command', id: 999999 } });
  }

  // A settled command: the API's 409, as its error object with --json.
  const settled = String(release.command.id);
  const done = await Promise.all([local('command', 'cancel', settled), remote('operator', 'command', 'cancel', settled)]);
  for (const run of done) {
    expect(run).toEqual({ code: 4, stdout: '', stderr: `error: command ${settled} is done; only a queued command can be cancelled\n` });
  }
  const [doneHere, doneThere] = await Promise.all([
    local('--json', 'command', 'cancel', settled),
    remote('operator', '--json', 'command', 'cancel', settled),
  ]);
  expect(doneHere.code).toBe(4);
  expect(parseJson(doneHere)).toEqual({
    code: 'conflict',
    message: `command ${settled} is done; only a queued command can be cancelled`,
    details: { command: release.command.id, status: 'done' },
  });
  expect(doneThere).toEqual(doneHere);
  // One of Slipway's own commands: refused whatever its status.
  const internal = await local('command', 'cancel', String(grant));
  expect(internal.code).toBe(4);
  expect(internal.stderr).toBe(`error: command ${grant} (grant) is internal to Slipway and cannot be cancelled\n`);

  // Bad arguments are refused before anything is opened; a viewer token by the API (403).
  const badId = await local('command', 'cancel', 'twelve');
  expect(badId.code).toBe(2);
  expect(badId.stderr).toMatch(/^error: .*argument 'id'.*expected a whole number\n$/);
  const emptyReason = await local('command', 'cancel', settled, '--reason', ' ');
  expect(emptyReason.code).toBe(2);
  expect(emptyReason.stderr).toMatch(/^error: .*--reason .*expected some text\n$/);
  const viewer = await remote('viewer', 'command', 'cancel', settled);
  expect(viewer.code).toBe(5);
  expect(viewer.stderr).toMatch(/^error: .*viewer token may not.*\n$/);

  expect(await rowCounts(env.database.db)).toEqual(before);
  expect((await commandRow(release.command.id)).status).toBe('done');
});
