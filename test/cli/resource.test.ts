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
  expect(run.stdout).toMatch(/created pending \(command #\d+\) {2}\[\S+ via system, reason: lease \d+ needs a resource\]/);
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

test('a resource is drained into maintenance with its lease carrying on, a second drain is refused, and undrain puts it back', async () => {
  const drained = await env.cli('resource', 'drain', String(lease.resourceId), '--reason', 'disk check');
  expect(drained.stderr).toBe('');
  expect(drained.code).toBe(0);
  expect(drained.stdout).toMatch(/^#\d+ drain resource:\d+ → done: in maintenance: takes no new leases; its 1 lease\(s\) carry on$/m);
  expect(await stateOf('resources', lease.resourceId)).toBe('maintenance');
  expect(await stateOf('leases', lease.id)).toBe('active');

  const again = await env.cli('resource', 'drain', String(lease.resourceId));
  expect(again.code).toBe(4);
  expect(again.stderr).toMatch(/^error: .*maintenance.*\n$/);

  const undrained = await env.cli('resource', 'undrain', String(lease.resourceId));
  expect(undrained.code).toBe(0);
  expect(await stateOf('resources', lease.resourceId)).toBe('active');
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
