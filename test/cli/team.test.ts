import { expect, test } from 'vitest';
import { cliTestEnv } from './cliTestEnv.ts';
import { parseJson } from './runCli.ts';

// `slipway team`, and the team options of `token create` and `lease create`.
const env = cliTestEnv();

test('team set, quota, list, show and unquota; every change is recorded with who made it', async () => {
  const made = await env.cli('team', 'set', 'ci', '--weight', '3');
  expect(made.stderr).toBe('');
  expect(made.stdout).toBe('team ci: weight 3\n');
  await env.cli('blueprint', 'create', '--name', 'boxes', '--driver', 'simulated', '--max-resources', '2');
  const quota = await env.cli('team', 'quota', 'ci', '--max', '2', '--blueprint', 'boxes');
  expect(quota.stdout).toBe('team ci: quotas 0 of 2 at boxes\n');
  await env.cli('team', 'quota', 'ci', '--max', '1', '--holder', 'token:bot');

  const listed = parseJson(await env.cli('--json', 'team', 'list'));
  expect(listed.map((t: { name: string }) => t.name)).toEqual(['ci', 'default']);
  expect(listed[0]).toMatchObject({
    weight: 3,
    quotas: [
      { blueprintName: 'boxes', holder: null, maxLeases: 2, counted: 0 },
      { blueprintName: null, holder: 'token:bot', maxLeases: 1, counted: 0 },
    ],
  });
  const table = await env.cli('team', 'list');
  expect(table.stdout).toMatch(/^NAME\s+WEIGHT\s+TOKENS\s+LEASES\s+WAITING\s+QUOTAS\n/);
  expect(table.stdout).toMatch(/\nci\s+3\s+0\s+0\s+0\s+0 of 2 at boxes; 0 of 1 overall for token:bot\n/);

  const removed = await env.cli('team', 'unquota', 'ci', '--holder', 'token:bot');
  expect(removed.stdout).toBe('team ci: quotas 0 of 2 at boxes\n');
  const shown = await env.cli('team', 'show', 'ci');
  expect(shown.stdout).toContain('team ci\n  weight   3\n');
  const changes = shown.stdout.slice(shown.stdout.indexOf('changes\n'));
  expect(changes.split('\n').filter(Boolean).slice(1)).toEqual([
    expect.stringMatching(/ {2}holder token:bot of team ci's quota of 1 lease overall removed {2}\(\S+@\S+, cli\)$/),
    expect.stringMatching(/ {2}holder token:bot of team ci's quota of 1 lease overall {2}\(\S+@\S+, cli\)$/),
    expect.stringMatching(/ {2}team ci's quota of 2 leases at boxes {2}\(\S+@\S+, cli\)$/),
    expect.stringMatching(/ {2}made with weight 3 {2}\(\S+@\S+, cli\)$/),
  ]);
});

test('token create --team puts the token in a team; lease create --team counts the lease there, and --no-queue is refused at a reached quota', async () => {
  await env.cli('team', 'set', 'qa');
  const token = parseJson(await env.cli('--json', 'token', 'create', '--name', 'qa-bot', '--role', 'user', '--team', 'qa'));
  expect(token.token).toMatchObject({ name: 'qa-bot', team: 'qa' });
  await env.cli('blueprint', 'create', '--name', 'desks', '--driver', 'simulated', '--max-resources', '3');
  await env.cli('team', 'quota', 'qa', '--max', '1', '--blueprint', 'desks');

  const first = parseJson(await env.cli('--json', 'lease', 'create', '--blueprint', 'desks', '--team', 'qa'));
  expect(first.lease).toMatchObject({ team: 'qa', state: 'active' });
  const shown = await env.cli('lease', 'show', String(first.lease.id));
  expect(shown.stdout).toMatch(/\n {2}team +qa\n/);

  const refused = await env.cli('lease', 'create', '--blueprint', 'desks', '--team', 'qa', '--no-queue');
  expect(refused.code).toBe(4);
  expect(refused.stderr).toBe(
    "error: team qa's quota of 1 lease at desks is reached (1 counted); the request asked not to wait (queue: false), so no lease was made\n",
  );
  const leases = parseJson(await env.cli('--json', 'lease', 'list', '--blueprint', 'desks'));
  expect(leases.items).toHaveLength(1);
  await env.cli('lease', 'release', String(first.lease.id));
});
