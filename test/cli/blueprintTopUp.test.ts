import { beforeAll, expect, test } from 'vitest';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { cliTestEnv } from './cliTestEnv.ts';
import { NO_SCHEDULED_COLLECTOR, rowCounts } from './rowCounts.ts';
import { parseJson } from './runCli.ts';

/**
 * `slipway blueprint top-up`, the CLI's `top_up` command (POST
 * /v1/blueprints/{id}/commands): queued the way `blueprint update` queues its
 * command. The collector's schedule is off, so only the CLI tops up.
 */
const env = cliTestEnv(NO_SCHEDULED_COLLECTOR);
const actor = { issuedBy: 'tester', source: 'cli' } as const;
let warmId: number;

beforeAll(async () => {
  const db = env.database.db;
  warmId = (await createBlueprint(db, { name: 'warm', driver: 'simulated', maxResources: 3, minResources: 2 }, actor)).id;
  await createBlueprint(db, { name: 'stopped', driver: 'simulated', maxResources: 3, minResources: 1 }, actor);
  await db.updateTable('blueprints').set({ state: 'disabled' }).where('name', '=', 'stopped').execute();
});

const liveResources = async (blueprintId: number) =>
  (
    await env.database.db.selectFrom('resources').select('state').where('blueprint_id', '=', blueprintId).where('state', '!=', 'destroyed').execute()
  ).map((r) => r.state);

test('blueprint top-up makes resources up to the warm minimum and waits until they are active', async () => {
  expect(await liveResources(warmId)).toEqual([]);
  const run = await env.cli('blueprint', 'top-up', 'warm', '--reason', 'before the rush');
  expect(run.stderr).toBe('');
  expect(run.code).toBe(0);
  const [, commandId] = new RegExp(`^top_up blueprint ${warmId}: queued as command (\\d+)$`, 'm').exec(run.stdout) ?? [];
  expect(run.stdout).toMatch(new RegExp(`^#${commandId} top_up blueprint:${warmId} → done: making 2 resource`, 'm'));
  expect(run.stdout).toMatch(new RegExp(`blueprint ${warmId} is enabled\\n$`));
  expect(await liveResources(warmId)).toEqual(['active', 'active']);
  const command = await env.database.db.selectFrom('commands').selectAll().where('id', '=', Number(commandId)).executeTakeFirstOrThrow();
  expect(command).toMatchObject({ kind: 'top_up', status: 'done', source: 'cli', reason: 'before the rush' });
  expect(command.issued_by).toMatch(/^\S+@\S+$/);

  // Again, by id and with --json: the API's answer to a waited command; nothing more to make.
  const again = await env.cli('--json', 'blueprint', 'top-up', String(warmId));
  expect(again.code, again.stderr).toBe(0);
  expect(parseJson(again)).toMatchObject({
    outcome: 'settled',
    state: 'enabled',
    coalesced: false,
    command: { kind: 'top_up', status: 'done', targetKind: 'blueprint', targetId: warmId, message: '2 warm of a minimum of 2; nothing to make' },
  });
  expect(await liveResources(warmId)).toEqual(['active', 'active']);
});

test('blueprint top-up --no-wait returns as soon as the command is queued', async () => {
  const run = await env.cli('--json', 'blueprint', 'top-up', 'warm', '--no-wait');
  expect(run.code, run.stderr).toBe(0);
  const body = parseJson(run);
  expect(body).toMatchObject({ coalesced: false, command: { kind: 'top_up', targetId: warmId, source: 'cli' } });
  expect(body.outcome).toBeUndefined();
});

test('blueprint top-up refuses an unknown or disabled blueprint and bad arguments, writing nothing', async () => {
  const before = await rowCounts(env.database.db);

  const missing = await env.cli('blueprint', 'top-up', 'nosuch');
  expect(missing).toEqual({ code: 3, stdout: '', stderr: 'error: blueprint nosuch does not exist\n' });
  const missingJson = await env.cli('--json', 'blueprint', 'top-up', 'nosuch');
  expect(missingJson.code).toBe(3);
  expect(parseJson(missingJson)).toEqual({
    code: 'not_found',
    message: 'blueprint nosuch does not exist',
    details: { kind: 'blueprint', id: 'nosuch' },
  });

  // A disabled blueprint does not take top_up: the API's 409, as its error object with --json.
  const disabled = await env.cli('blueprint', 'top-up', 'stopped');
  expect(disabled.code).toBe(4);
  expect(disabled.stdout).toBe('');
  expect(disabled.stderr).toMatch(/^error: blueprint \d+ is disabled; top_up is accepted only when it is enabled\n$/);
  const disabledJson = await env.cli('--json', 'blueprint', 'top-up', 'stopped');
  expect(disabledJson.code).toBe(4);
  expect(parseJson(disabledJson)).toMatchObject({ code: 'conflict', details: { state: 'disabled', kind: 'top_up', acceptedIn: ['enabled'] } });

  for (const args of [
    ['blueprint', 'top-up'],
    ['blueprint', 'top-up', '99999999999999999999'],
    ['blueprint', 'top-up', 'warm', '--timeout', '-1'],
    ['blueprint', 'top-up', 'warm', '--setting', 'a=1'],
  ]) {
    const bad = await env.cli(...args);
    expect(bad.code, `${args.join(' ')}: ${bad.stderr}`).toBe(2);
    expect(bad.stderr).toMatch(/^error: [^\n]+\n$/);
  }

  expect(await rowCounts(env.database.db)).toEqual(before);
});
