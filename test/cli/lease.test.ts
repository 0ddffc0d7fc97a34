import { beforeAll, expect, test } from 'vitest';
import { cliActor } from '../../src/domain/Actor.ts';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { appendCommand } from '../../src/queue/appendCommand.ts';
import { cliTestEnv } from './cliTestEnv.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { finished, parseJson, spawnCli } from './runCli.ts';
import { NO_SCHEDULED_COLLECTOR, rowCounts } from './rowCounts.ts';

const env = cliTestEnv(NO_SCHEDULED_COLLECTOR);
const actor = { issuedBy: 'tester', source: 'cli' } as const;

beforeAll(async () => {
  await createBlueprint(env.database.db, { name: 'sim', driver: 'simulated', maxResources: 3, leasesPerResource: 2 }, actor);
  // One slot in all: a second lease waits for the first to go.
  await createBlueprint(env.database.db, { name: 'single', driver: 'simulated', maxResources: 1 }, actor);
});

const leaseRow = (id: number) => env.database.db.selectFrom('leases').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

async function activeLease(blueprint: string): Promise<number> {
  const run = await env.cli('--json', 'lease', 'create', '--blueprint', blueprint);
  expect(run.code).toBe(0);
  return parseJson(run).lease.id;
}

test('lease create waits until the lease is active, showing progress', async () => {
  const run = await env.cli('lease', 'create', '--blueprint', 'sim', '--holder', 'alice', '--reason', 'ci job 7');
  expect(run.stderr).toBe('');
  expect(run.code).toBe(0);
  const id = Number(/^lease (\d+) requested for alice \(command \d+\)$/m.exec(run.stdout)?.[1]);
  expect((await leaseRow(id)).state).toBe('active');
  // One line per command status change, across the objects the tree reaches.
  expect(run.stdout).toMatch(/^#\d+ need_resource blueprint:\d+ → done/m);
  expect(run.stdout).toMatch(/^ +#\d+ acquire resource:\d+ → done: granted slot/m);
  expect(run.stdout).toMatch(/^ +#\d+ grant lease:\d+ → done: acquired slot \d+ of resource \d+; active$/m);
  expect(run.stdout).toMatch(new RegExp(`^lease ${id}: active$`, 'm'));
  expect(run.stdout).toMatch(/holder\s+alice/);
});

test('lease create keeps waiting while the lease waits for capacity, though its command tree has settled', async () => {
  const first = await activeLease('single');
  const second = spawnCli(['lease', 'create', '--blueprint', 'single', '--holder', 'second'], env.database.url);
  const output = finished(second);
  const waiter = await waitFor('the second lease to wait at the blueprint', () =>
    env.database.db.selectFrom('blueprint_waiters').select('lease_id').executeTakeFirst(),
  );
  const unsettled = await env.database.db.selectFrom('commands').select('id').where('status', 'in', ['queued', 'running']).executeTakeFirst();
  expect(unsettled).toBeUndefined();
  expect(second.exitCode).toBeNull();

  // While it waits, where it stands (no lease granted here while others waited, so no estimate), in progress and in `lease show`.
  await waitFor('its place in line shown', async () => (await env.cli('lease', 'show', String(waiter.lease_id))).stdout.includes('line'));
  const shown = await env.cli('lease', 'show', String(waiter.lease_id));
  expect(shown.stdout).toMatch(
    /\n\nwaiting\n {2}line {11}1st in line at single \(of 1\), no estimate\n {2}why {12}at its limit; 1 of 1 live, no free slot\n {2}since .*\n {2}estimate from {2}no basis yet: no lease was granted at single while others waited$/m,
  );
  expect(JSON.parse((await env.cli('--json', 'lease', 'show', String(waiter.lease_id))).stdout).line).toMatchObject({
    blueprintName: 'single',
    position: 1,
    waiting: 1,
    estimateSeconds: null,
  });
  await appendCommand(env.database.db, { target: { kind: 'lease', id: first }, kind: 'release', actor });
  const run = await output;
  expect(run.code).toBe(0);
  expect(run.stdout).toContain('1st in line at single (of 1), no estimate: at its limit; 1 of 1 live, no free slot\n');
  expect(run.stdout).toContain(`lease ${waiter.lease_id}: pending → acquired\n`);
  expect(run.stdout).toContain(`lease ${waiter.lease_id}: acquired → active\n`);
  expect(run.stdout).toMatch(new RegExp(`^lease ${waiter.lease_id}: active$`, 'm'));
  expect((await leaseRow(waiter.lease_id)).state).toBe('active');
});

test('lease create --wait-timeout: a lease still waiting at its deadline is released by the collector, and the CLI exits 1 saying so', async () => {
  // A pool of one slot of its own: the tests before leave 'single' taken.
  await createBlueprint(env.database.db, { name: 'one-slot', driver: 'simulated', maxResources: 1 }, actor);
  const first = await activeLease('one-slot');
  const second = spawnCli(['lease', 'create', '--blueprint', 'one-slot', '--holder', 'late', '--wait-timeout', '1s'], env.database.url);
  const output = finished(second);
  const waiter = await waitFor('the lease to wait at the blueprint', () =>
    env.database.db.selectFrom('blueprint_waiters').select('lease_id').executeTakeFirst(),
  );
  const deadline = (await leaseRow(waiter.lease_id)).wait_deadline!;
  await waitFor('its wait deadline to pass', async () => deadline.getTime() < Date.now() - 100);
  expect((await env.cli('gc', 'run')).code).toBe(0);
  const run = await output;
  expect(run.code).toBe(1);
  expect(run.stderr).toBe(
    `error: lease ${waiter.lease_id} was not active by its wait deadline ${deadline.toISOString().replace('T', ' ')}; it is destroyed\n`,
  );
  const [released] = await env.database.db
    .selectFrom('commands')
    .select(['issued_by', 'source'])
    .where('target_kind', '=', 'lease')
    .where('target_id', '=', waiter.lease_id)
    .where('kind', '=', 'release')
    .execute();
  expect(released).toEqual({ issued_by: 'system:deadline', source: 'gc' });
  // The lease that held the slot keeps it.
  expect((await leaseRow(first)).state).toBe('active');
  await appendCommand(env.database.db, { target: { kind: 'lease', id: first }, kind: 'release', actor });
});

test('lease create --json ends with the active lease and its settled command tree', async () => {
  const run = await env.cli('--json', 'lease', 'create', '--blueprint', 'sim', '--expires-in', '1h30m');
  expect(run.code).toBe(0);
  const result = parseJson(run);
  expect(result).toMatchObject({ outcome: 'settled', lease: { state: 'active', holder: cliActor().issuedBy, blueprintName: 'sim' } });
  const expiresInMs = Date.parse(result.lease.expiresAt) - Date.parse(result.lease.createdAt);
  expect(Math.abs(expiresInMs - 90 * 60_000)).toBeLessThan(60_000);
  expect(result.tree[0]).toMatchObject({ kind: 'need_resource', status: 'done', depth: 0, source: 'cli' });
  expect(result.tree.every((c: { status: string }) => ['done', 'cancelled', 'coalesced'].includes(c.status))).toBe(true);
});

test('lease create --no-wait returns while the lease is still being set up', async () => {
  const run = await env.cli('--json', 'lease', 'create', '--blueprint', 'sim', '--no-wait');
  expect(run.code).toBe(0);
  const { lease, command } = parseJson(run);
  expect(lease.state).toBe('pending');
  expect(command).toMatchObject({ kind: 'need_resource', targetKind: 'blueprint', targetId: lease.blueprintId });
});

test('lease release waits until the lease is destroyed, and show gives its timeline', async () => {
  const id = await activeLease('sim');
  const run = await env.cli('lease', 'release', String(id), '--reason', 'done with it');
  expect(run.stderr).toBe('');
  expect(run.code).toBe(0);
  expect(run.stdout).toMatch(new RegExp(`^release lease ${id}: queued as command \\d+$`, 'm'));
  expect(run.stdout).toMatch(new RegExp(`^#\\d+ release lease:${id} → done: released and destroyed$`, 'm'));
  expect(run.stdout).toMatch(new RegExp(`^lease ${id} is destroyed$`, 'm'));
  expect((await leaseRow(id)).state).toBe('destroyed');

  const show = await env.cli('lease', 'show', String(id));
  expect(show.code).toBe(0);
  expect(show.stdout).toMatch(new RegExp(`^lease ${id}: destroyed`));
  expect(show.stdout).toMatch(/queue\n {2}\(none\)/);
  // Who, from where, why and what, newest first; a command where it settled, with when it was queued.
  const timeline = show.stdout.slice(show.stdout.indexOf('timeline, newest first'));
  const release = timeline.search(/command #\d+ release: done \(queued [^)]+\) {2}\[\S+ via cli, reason: done with it\] — released and destroyed/);
  // Both transitions are the release's own (decision 0024).
  const releaseId = /command #(\d+) release: done/.exec(timeline)![1];
  const released = timeline.search(new RegExp(`state active → released \\(command #${releaseId}\\) {2}\\[\\S+ via cli, reason: done with it\\]`));
  const destroyed = timeline.search(new RegExp(`state released → destroyed \\(command #${releaseId}\\) {2}\\[\\S+ via cli, reason: done with it\\]`));
  expect(release).toBeGreaterThan(0);
  expect(destroyed).toBeGreaterThan(release);
  expect(released).toBeGreaterThan(destroyed);
});

test('a duplicate release joins the release already queued and waits for it', async () => {
  const db = env.database.db;
  const id = await activeLease('sim');
  // Holding the lease's advisory lock keeps every drain off it: the first
  // release stays queued for as long as the test needs.
  const lock = await env.database.pool.connect();
  await lock.query("select pg_advisory_lock(object_lock_key('lease', $1))", [id]);
  try {
    const first = await appendCommand(db, { target: { kind: 'lease', id }, kind: 'release', actor });

    const noWait = await env.cli('lease', 'release', String(id), '--no-wait');
    expect(noWait.code).toBe(0);
    expect(noWait.stdout).toBe(`release lease ${id}: already queued as command ${first.command.id}\n`);

    const waiting = finished(spawnCli(['--json', 'lease', 'release', String(id)], env.database.url));
    await waitFor('the second duplicate to be recorded', async () => {
      const rows = await db.selectFrom('commands').select('id').where('coalesced_into', '=', first.command.id).execute();
      return rows.length === 2;
    });
    await lock.query("select pg_advisory_unlock(object_lock_key('lease', $1))", [id]);

    const run = await waiting;
    expect(run.code).toBe(0);
    const result = parseJson(run);
    expect(result).toMatchObject({ coalesced: true, state: 'destroyed', command: { id: first.command.id, status: 'done' } });
    expect(result.record).toMatchObject({ status: 'coalesced', coalescedInto: first.command.id, source: 'cli' });
  } finally {
    lock.release();
  }
});

test('releasing a destroyed lease is refused in one line naming its state', async () => {
  const id = await activeLease('sim');
  expect((await env.cli('lease', 'release', String(id))).code).toBe(0);
  const before = await rowCounts(env.database.db);
  const run = await env.cli('lease', 'release', String(id));
  expect(run.code).toBe(4);
  expect(run.stdout).toBe('');
  expect(run.stderr).toMatch(
    new RegExp(`^error: lease ${id} is destroyed; release is accepted only when it is [a-z, ]+ \\(command \\d+ already did it\\)\\n$`),
  );
  expect(await rowCounts(env.database.db)).toEqual(before);
});

test('lease list shows live leases newest first (--all: destroyed ones too), filters by state, blueprint and holder, and pages on id', async () => {
  type Listed = { id: number; state: string; blueprintName: string };
  const ids = (page: { items: Listed[] }) => page.items.map((l) => l.id);
  const all = parseJson(await env.cli('--json', 'lease', 'list', '--blueprint', 'sim', '--all'));
  expect(all.items.length).toBeGreaterThanOrEqual(4);
  expect(all.items.every((l: Listed) => l.blueprintName === 'sim')).toBe(true);
  expect(ids(all)).toEqual([...ids(all)].sort((a, b) => b - a));
  expect(all.items.some((l: Listed) => l.state === 'destroyed')).toBe(true);
  const live = parseJson(await env.cli('--json', 'lease', 'list', '--blueprint', 'sim'));
  expect(live.items.length).toBeGreaterThan(0);
  expect(live.items).toEqual(all.items.filter((l: Listed) => l.state !== 'destroyed'));
  const oldestFirst = parseJson(await env.cli('--json', 'lease', 'list', '--blueprint', 'sim', '--all', '--order', 'oldest'));
  expect(ids(oldestFirst)).toEqual([...ids(all)].reverse());

  const alice = await env.cli('lease', 'list', '--holder', 'alice', '--state', 'active');
  expect(alice.code).toBe(0);
  expect(alice.stdout.trim().split('\n')).toHaveLength(2);
  expect(alice.stdout).toMatch(/^\d+\s+active\s+sim\s+alice\s/m);

  const page = parseJson(await env.cli('--json', 'lease', 'list', '--blueprint', 'sim', '--all', '--limit', '2', '--after', String(all.items[0].id)));
  expect(page.items.map((l: { id: number }) => l.id)).toEqual([all.items[1].id, all.items[2].id]);
  expect(page.next).toBe(all.items[2].id);

  const both = await env.cli('lease', 'list', '--all', '--state', 'active');
  expect(both.code).toBe(2);
  expect(both.stderr).toMatch(/^error: option '--all' cannot be used with option '--state <state>'\n$/);
});

test('lease explain says why a lease waits and what would grant it; lease create --dry-run answers for a request and writes nothing', async () => {
  await createBlueprint(env.database.db, { name: 'explained', driver: 'simulated', maxResources: 1, leasesPerResource: 1 }, actor);
  const first = await activeLease('explained');
  const queued = await env.cli('--json', 'lease', 'create', '--blueprint', 'explained', '--no-wait');
  const waiting = parseJson(queued).lease.id as number;
  await waitFor('the lease to wait in line', () =>
    env.database.db.selectFrom('blueprint_waiters').select('lease_id').where('lease_id', '=', waiting).executeTakeFirst(),
  );

  const explained = await env.cli('lease', 'explain', String(waiting));
  expect(explained.code, explained.stderr).toBe(0);
  expect(explained.stdout).toContain(
    [
      `lease ${waiting} would not be granted now: explained: blueprint explained is at its limit: 1 of 1 resources, 1 lease(s) each, no free slot`,
      '',
      'at explained: not granted now',
      '  capacity: blueprint explained is at its limit: 1 of 1 resources, 1 lease(s) each, no free slot',
      "    → blueprint explained's max resources at 2 (it is 1) would grant it",
    ].join('\n'),
  );
  const json = JSON.parse((await env.cli('--json', 'lease', 'explain', String(waiting))).stdout);
  expect(json).toMatchObject({ lease: waiting, state: 'pending', grantedNow: false, goesTo: 'explained' });

  const before = await rowCounts(env.database.db);
  const dry = await env.cli('--json', 'lease', 'create', '--blueprint', 'sim', '--dry-run');
  expect(dry.code, dry.stderr).toBe(0);
  expect(JSON.parse(dry.stdout)).toMatchObject({ lease: null, grantedNow: true, goesTo: 'sim' });
  const full = await env.cli('lease', 'create', '--blueprint', 'explained', '--dry-run');
  expect(full.stdout).toMatch(/^the request would not be granted now: explained: blueprint explained is at its limit/);
  expect(await rowCounts(env.database.db)).toEqual(before);
  for (const id of [first, waiting]) expect((await env.cli('lease', 'release', String(id))).code).toBe(0);
});
