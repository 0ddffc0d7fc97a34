import { beforeAll, expect, test } from 'vitest';
import { cliTestEnv } from '../cli/cliTestEnv.ts';
import { parseJson } from '../cli/runCli.ts';

// The collector's and renewal's CLI, run as a real child process against a
// database with a worker running: one without the collector's schedule, so
// the passes this file sees are its own.
const env = cliTestEnv({ SLIPWAY_GC_INTERVAL_MINUTES: '0' });

beforeAll(async () => {
  const run = await env.cli(
    'blueprint',
    'create',
    '--name',
    'warm',
    '--driver',
    'simulated',
    '--max-resources',
    '3',
    '--min-resources',
    '2',
    '--idle-timeout',
    '10m',
  );
  expect(run.code).toBe(0);
});

const leaseRow = (id: number) => env.database.db.selectFrom('leases').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

test('blueprint create takes a warm minimum and an idle timeout, and show prints them', async () => {
  const run = await env.cli('blueprint', 'show', 'warm');
  expect(run.code).toBe(0);
  expect(run.stdout).toMatch(/warm minimum\s+2/);
  expect(run.stdout).toMatch(/idle timeout\s+10m/);
  const bad = await env.cli('blueprint', 'create', '--name', 'toomany', '--driver', 'simulated', '--max-resources', '1', '--min-resources', '2');
  expect(bad.code).toBe(2);
  expect(bad.stderr).toMatch(/minResources: the warm minimum \(minResources\) cannot exceed maxResources/);
});

test('gc run runs one pass and prints what it asked for; gc status shows when passes ran and what they found', async () => {
  const run = await env.cli('gc', 'run');
  expect(run.stderr).toBe('');
  expect(run.code).toBe(0);
  expect(run.stdout).toMatch(/^gc pass \d+ \(cli\): done/m);
  expect(run.stdout).toMatch(/topUpWarmMinimum: found 1/);
  expect(run.stdout).toMatch(/top_up blueprint:\d+: queued as command \d+ — 0 warm resource\(s\) of a minimum of 2/);
  expect(run.stdout).toMatch(/pruneHistory: found 0; pruned 0 leases, 0 resources/);

  const json = await env.cli('--json', 'gc', 'run');
  expect(json.code).toBe(0);
  const pass = parseJson(json);
  expect(pass).toMatchObject({ trigger: 'cli', status: 'done', steps: { expireLeases: { found: 0, actions: [] } } });

  const status = await env.cli('gc', 'status');
  expect(status.code).toBe(0);
  expect(status.stdout).toMatch(/^collector: every 1 minute\(s\)/m);
  expect(status.stdout).toMatch(/PASS\s+TRIGGER\s+STATUS\s+STARTED\s+FINISHED\s+COMMANDS\s+PRUNED/);
  expect(status.stdout).toMatch(new RegExp(`^${pass.id}\\s+cli\\s+done`, 'm'));
  const statusJson = parseJson(await env.cli('--json', 'gc', 'status', '--limit', '1'));
  expect(statusJson.passes).toHaveLength(1);
  expect(statusJson.passes[0].id).toBe(pass.id);
});

test('lease create --heartbeat makes a heartbeat lease; lease renew beats it and pushes its expiry back', async () => {
  const created = await env.cli('--json', 'lease', 'create', '--blueprint', 'warm', '--heartbeat', '30s', '--expires-in', '1h');
  expect(created.code).toBe(0);
  const id = parseJson(created).lease.id as number;
  const before = await leaseRow(id);
  expect(before).toMatchObject({ state: 'active', heartbeat_ms: 30_000, term_ms: 3_600_000 });
  expect(before.heartbeat_deadline).not.toBeNull();

  const shown = await env.cli('lease', 'show', String(id));
  expect(shown.stdout).toMatch(/heartbeat\s+every 30s; next renewal due by \d{4}-/);

  const renewed = await env.cli('lease', 'renew', String(id), '--expires-in', '2h', '--reason', 'still building');
  expect(renewed.stderr).toBe('');
  expect(renewed.code).toBe(0);
  expect(renewed.stdout).toMatch(/renew lease \d+: queued as command \d+/);
  expect(renewed.stdout).toMatch(/renew lease:\d+ → done: renewed: expires .*; next heartbeat due by/);
  const after = await leaseRow(id);
  expect(after.term_ms).toBe(7_200_000);
  expect(after.expires_at!.getTime()).toBeGreaterThan(before.expires_at!.getTime() + 3_000_000);
  expect(after.heartbeat_deadline!.getTime()).toBeGreaterThanOrEqual(before.heartbeat_deadline!.getTime());
});

test('bad renewals and heartbeats are refused in one line, with nothing written', async () => {
  const badDuration = await env.cli('lease', 'create', '--blueprint', 'warm', '--heartbeat', 'soon');
  expect(badDuration.code).toBe(2);
  expect(badDuration.stderr).toMatch(/--heartbeat.*expected a duration like 90s/);
  const tooShort = await env.cli('lease', 'create', '--blueprint', 'warm', '--heartbeat', '0s');
  expect(tooShort.code).toBe(2);
  const missing = await env.cli('lease', 'renew', '999999');
  expect(missing.code).toBe(3);
  expect(missing.stderr.trim().split('\n')).toHaveLength(1);
});
