import { expect, test } from 'vitest';
import { apiTestEnv } from '../api/support/apiTestEnv.ts';
import { simulatedBlueprint } from '../api/support/fixtures.ts';
import { parseJson, runCli, type CliRun } from './runCli.ts';

/**
 * What a `user` token writes (a reason, attributes) and what a CLI user
 * names a holder is shown to operators by the CLI: with every control
 * character escaped, so none of it can drive their terminal.
 */
const env = apiTestEnv({ worker: true });

/** ESC starting a colour, an OSC setting the window title, a C1 CSI, a bidi override. */
const HOSTILE = '\u001b[31mred\u001b]0;pwned\u0007\u009b2J\u202eevil';
/** Anything a terminal acts on: C0 controls but the newline, DEL, C1 controls, bidi overrides. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: the controls are what the test looks for
const RAW_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e]/;

function cli(...args: string[]): Promise<CliRun> {
  return runCli(args, env.database.url);
}

function expectShownSafely(run: CliRun, what: string): void {
  expect(run.code, `${what}: ${run.stderr}`).toBe(0);
  expect(run.stdout, what).not.toMatch(RAW_CONTROL);
  expect(run.stdout, what).toContain('\\x1b[31mred\\x1b]0;pwned\\x07\\x9b2J\\u202eevil');
}

test('a reason, attributes and a holder with terminal escapes are shown escaped by every view; --json keeps them, escaped as JSON', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const created = await env.as.user.post('/v1/leases?wait=60', { blueprint: name, reason: HOSTILE, attributes: { [HOSTILE]: HOSTILE } });
  expect(created.status, JSON.stringify(created.body)).toBe(200);
  const id = String(created.body.lease.id);
  const command = String(created.body.command.id);
  const byCli = await cli('lease', 'create', '--blueprint', name, '--holder', HOSTILE, '--reason', HOSTILE, '--no-wait');
  expectShownSafely(byCli, 'lease create');

  expectShownSafely(await cli('lease', 'show', id), 'lease show');
  expectShownSafely(await cli('lease', 'list', '--blueprint', name), 'lease list');
  expectShownSafely(await cli('command', 'show', command), 'command show');

  const json = await cli('--json', 'lease', 'show', id);
  expect(json.stdout).not.toMatch(RAW_CONTROL);
  expect(parseJson(json).lease.attributes[HOSTILE]).toBe(HOSTILE);
  const listed = await cli('--json', 'lease', 'list', '--blueprint', name);
  expect(listed.stdout).not.toMatch(RAW_CONTROL);
  expect(parseJson(listed).items.map((lease: { holder: string }) => lease.holder)).toContain(HOSTILE);
});

test('a newline in a reason cannot forge a line of output: it is shown as \\x0a', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const created = await env.as.user.post('/v1/leases', { blueprint: name, reason: 'fine\n2099-01-01 00:00:00.000Z  state active → destroyed' });
  expect(created.status, JSON.stringify(created.body)).toBe(202);
  const shown = await cli('command', 'show', String(created.body.command.id));
  expect(shown.code, shown.stderr).toBe(0);
  expect(shown.stdout).toContain('fine\\x0a2099-01-01');
  expect(shown.stdout).not.toMatch(/^2099-01-01/m);
});
