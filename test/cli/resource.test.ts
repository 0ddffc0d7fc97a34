import { beforeAll, expect, test } from 'vitest';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { cliTestEnv } from './cliTestEnv.ts';
import { parseJson } from './runCli.ts';

const env = cliTestEnv();
const actor = { issuedBy: 'tester', source: 'cli' } as const;
let lease: { id: number; resourceId: number; slot: number };

beforeAll(async () => {
  await createBlueprint(env.database.db, { name: 'sim', driver: 'simulated', maxResources: 2, leasesPerResource: 2 }, actor);
  lease = parseJson(await env.cli('--json', 'lease', 'create', '--blueprint', 'sim', '--holder', 'bob')).lease;
});

const stateOf = async (table: 'leases' | 'resources', id: number) =>
  (await env.database.db.selectFrom(table).select('state').where('id', '=', id).executeTakeFirstOrThrow()).state;

test('resource show lists the leases holding its slots', async () => {
  const run = await env.cli('resource', 'show', String(lease.resourceId));
  expect(run.code).toBe(0);
  expect(run.stdout).toMatch(new RegExp(`^resource ${lease.resourceId}: active\\n`));
  expect(run.stdout).toMatch(/slots used +1 of 2/);
  expect(run.stdout).toMatch(new RegExp(`slot ${lease.slot}: lease ${lease.id} \\(bob\\) since `));
  expect(run.stdout).toMatch(/created pending \(command #\d+\) {2}\[system:blueprint via system, reason: lease \d+ needs a resource\]/);
});

test('resource list filters by state and blueprint', async () => {
  const active = parseJson(await env.cli('--json', 'resource', 'list', '--state', 'active', '--blueprint', 'sim'));
  expect(active.items).toMatchObject([{ id: lease.resourceId, usedSlots: 1, capacity: 2, blueprintName: 'sim' }]);
  const destroyed = await env.cli('resource', 'list', '--state', 'destroyed');
  expect(destroyed.stdout).toBe('(none)\n');
});

test('reclaiming a resource a lease holds fails with the outcome message', async () => {
  const run = await env.cli('resource', 'reclaim', String(lease.resourceId));
  expect(run.code).toBe(1);
  expect(run.stdout).toMatch(/^#\d+ reclaim resource:\d+ → failed: not reclaimed: 1 lease\(s\) hold it$/m);
  expect(run.stderr).toMatch(/^error: command #\d+ reclaim resource:\d+ failed: not reclaimed: 1 lease\(s\) hold it\n$/);
  expect(await stateOf('resources', lease.resourceId)).toBe('active');
});

test('a resource is cordoned into maintenance with its lease carrying on, a second cordon is refused, and uncordon puts it back', async () => {
  const cordoned = await env.cli('resource', 'cordon', String(lease.resourceId), '--reason', 'disk check');
  expect(cordoned.stderr).toBe('');
  expect(cordoned.code).toBe(0);
  expect(cordoned.stdout).toMatch(/^#\d+ cordon resource:\d+ → done: in maintenance: takes no new leases; its 1 lease\(s\) carry on$/m);
  expect(await stateOf('resources', lease.resourceId)).toBe('maintenance');
  expect(await stateOf('leases', lease.id)).toBe('active');

  const again = await env.cli('resource', 'cordon', String(lease.resourceId));
  expect(again.code).toBe(4);
  expect(again.stderr).toMatch(/^error: .*maintenance.*\n$/);

  const uncordoned = await env.cli('resource', 'uncordon', String(lease.resourceId));
  expect(uncordoned.code).toBe(0);
  expect(await stateOf('resources', lease.resourceId)).toBe('active');
});

test('resource check asks the driver now: healthy changes nothing, unhealthy quarantines; repair fails while unhealthy and puts it back once healthy', async () => {
  await createBlueprint(env.database.db, { name: 'probed', driver: 'simulated', maxResources: 1, leasesPerResource: 2 }, actor);
  const probed = parseJson(await env.cli('--json', 'lease', 'create', '--blueprint', 'probed', '--holder', 'carol')).lease;
  const id = String(probed.resourceId);
  const settings = async (checks: Record<string, unknown>) =>
    expect((await env.cli('blueprint', 'update', 'probed', '--settings', JSON.stringify({ checks }))).code).toBe(0);

  const healthy = await env.cli('resource', 'check', id, '--reason', 'routine');
  expect(healthy.stderr).toBe('');
  expect(healthy.code).toBe(0);
  expect(healthy.stdout).toMatch(new RegExp(`^#\\d+ check resource:${id} → done: healthy$`, 'm'));
  expect(healthy.stdout).toMatch(new RegExp(`^resource ${id} is active$`, 'm'));
  expect((await env.cli('resource', 'show', id)).stdout).toMatch(/^ +health +healthy, checked \S+/m);

  // Found unhealthy: quarantined, its lease carries on; the check itself succeeded.
  await settings({ unhealthy: [probed.resourceId] });
  const unhealthy = await env.cli('resource', 'check', id);
  expect(unhealthy.code).toBe(0);
  const said = `simulated: resource ${id} is unhealthy`;
  expect(unhealthy.stdout).toMatch(new RegExp(`^#\\d+ check resource:${id} → done: unhealthy: ${said}; quarantined: it takes no new leases$`, 'm'));
  expect(unhealthy.stdout).toMatch(new RegExp(`^resource ${id} is quarantined$`, 'm'));
  const shown = (await env.cli('resource', 'show', id)).stdout;
  expect(shown).toMatch(new RegExp(`^resource ${id}: quarantined\\n`));
  expect(shown).toMatch(new RegExp(`^ +health +unhealthy \\(${said}\\), checked \\S+`, 'm'));
  expect(await stateOf('leases', probed.id)).toBe('active');

  // Repair while the driver still says unhealthy: the repair fails (exit 1) and the resource stays quarantined.
  const stillBad = await env.cli('resource', 'repair', id);
  expect(stillBad.code).toBe(1);
  expect(stillBad.stdout).toMatch(new RegExp(`^#\\d+ repair resource:${id} → failed: still unhealthy: ${said}$`, 'm'));
  expect(stillBad.stderr).toMatch(new RegExp(`^error: command #\\d+ repair resource:${id} failed: still unhealthy: ${said}\\n$`));
  expect(await stateOf('resources', probed.resourceId)).toBe('quarantined');

  // Healthy again: the repair puts it back in service; a repair of an active resource is refused before it is queued.
  await settings({});
  const repaired = await env.cli('resource', 'repair', id, '--reason', 'disk replaced');
  expect(repaired.stderr).toBe('');
  expect(repaired.code).toBe(0);
  expect(repaired.stdout).toMatch(new RegExp(`^#\\d+ repair resource:${id} → done: healthy: repaired, back in service$`, 'm'));
  expect(await stateOf('resources', probed.resourceId)).toBe('active');
  const refused = await env.cli('resource', 'repair', id);
  expect(refused.code).toBe(4);
  expect(refused.stderr).toMatch(/^error: .*active.*\n$/);
});

test('resource check of a resource found gone waits while it and its lease are broken and destroyed', async () => {
  await createBlueprint(env.database.db, { name: 'vanishing', driver: 'simulated', maxResources: 1 }, actor);
  const lease = parseJson(await env.cli('--json', 'lease', 'create', '--blueprint', 'vanishing', '--holder', 'dave')).lease;
  const id = String(lease.resourceId);
  const update = await env.cli('blueprint', 'update', 'vanishing', '--settings', JSON.stringify({ checks: { gone: [lease.resourceId] } }));
  expect(update.code).toBe(0);

  const run = await env.cli('--json', 'resource', 'check', id);
  expect(run.stderr).toBe('');
  expect(run.code).toBe(0);
  const waited = parseJson(run);
  expect(waited.state).toBe('destroyed');
  expect(waited.command).toMatchObject({
    kind: 'check',
    status: 'done',
    message: `gone: simulated: resource ${id} is gone; broken, and its 1 lease(s) with it`,
  });
  expect(await stateOf('resources', lease.resourceId)).toBe('destroyed');
  expect(await stateOf('leases', lease.id)).toBe('destroyed');
});

test('releasing a resource releases its leases first and waits until it is destroyed', async () => {
  const run = await env.cli('resource', 'release', String(lease.resourceId), '--reason', 'host retired');
  expect(run.stderr).toBe('');
  expect(run.code).toBe(0);
  expect(run.stdout).toMatch(new RegExp(`^ +#\\d+ release lease:${lease.id} → done`, 'm'));
  expect(run.stdout).toMatch(new RegExp(`^resource ${lease.resourceId} is destroyed$`, 'm'));
  expect(await stateOf('leases', lease.id)).toBe('destroyed');
  expect(await stateOf('resources', lease.resourceId)).toBe('destroyed');
});
