import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect, test } from 'vitest';
import { ApiServer } from '../../src/server/ApiServer.ts';
import { LEASE_RUN_EXIT } from '../../src/cli/leaseRun/leaseRunExit.ts';
import { loadConfig } from '../../src/config.ts';
import { apiTestEnv } from '../api/support/apiTestEnv.ts';
import { simulatedBlueprint } from '../api/support/fixtures.ts';
import { testLog } from '../helpers/testDatabase.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { NO_SCHEDULED_COLLECTOR } from './rowCounts.ts';
import { type CliRun, finished, runCli, spawnCli } from './runCli.ts';

/**
 * `slipway lease run`, the real executable, against a real API server and
 * worker (remote mode, as CI uses it; one test runs it on the database):
 * its command really runs, and gets real signals. Each command leaves marks
 * in a file (`mark`) so the test knows what it saw and when.
 */
const env = apiTestEnv({ worker: true, env: NO_SCHEDULED_COLLECTOR });

/** Nothing listens there: a remote run that touched the database would fail. */
const NO_DATABASE = 'postgres://nobody@127.0.0.1:1/nothing';

const remoteEnv = (url = env.server.url) => ({ SLIPWAY_URL: url, SLIPWAY_TOKEN: env.as.user.token! });
const leaseRun = (args: string[], url?: string) => spawnCli(['lease', 'run', ...args], NO_DATABASE, remoteEnv(url));

const leaseRow = (id: number) => env.database.db.selectFrom('leases').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
const gone = (state: string) => ['released', 'destroyed'].includes(state);
const lastCommand = async (id: number) =>
  env.database.db
    .selectFrom('commands')
    .select(['kind', 'reason', 'issued_by'])
    .where('target_kind', '=', 'lease')
    .where('target_id', '=', id)
    .orderBy('id', 'desc')
    .executeTakeFirstOrThrow();

async function scratch(): Promise<{ dir: string; marks: () => Promise<string[]> }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'slipway-lease-run-'));
  const marks = async () => (await readFile(path.join(dir, 'marks'), 'utf8').catch(() => '')).split('\n').filter(Boolean);
  return { dir, marks };
}

/** A shell command that appends `$1 <ms since epoch>` to the scratch directory's marks. */
const mark = (dir: string, what: string) => `echo "${what} $(date +%s%3N)" >> ${dir}/marks`;

/** Collects a started CLI's stderr as it comes, to wait for a line in it. */
function stderrOf(child: ChildProcess): { text: () => string; done: Promise<CliRun> } {
  let text = '';
  child.stderr!.on('data', (chunk) => (text += chunk));
  return { text: () => text, done: finished(child) };
}

const leaseIdIn = (stderr: string) => Number(/lease (\d+) requested/.exec(stderr)?.[1]);

test('the command runs with the lease in its environment, its output alone on stdout, and its exit status passes through', async () => {
  const { name } = await simulatedBlueprint(env.as.admin, { labels: { 'gpu-type': 'a100' } });
  const { dir } = await scratch();
  const run = await finished(
    leaseRun([
      '--blueprint',
      name,
      '--json-env',
      `${dir}/lease.json`,
      '--',
      'sh',
      '-c',
      'echo "$SLIPWAY_LEASE_ID $SLIPWAY_BLUEPRINT $SLIPWAY_RESOURCE_ID $SLIPWAY_SLOT $SLIPWAY_LABEL_GPU_TYPE $SLIPWAY_ATTR_SIMULATED"; exit 7',
    ]),
  );
  expect(run.code, run.stderr).toBe(7);
  const id = Number(run.stdout.split(' ')[0]);
  const lease = await leaseRow(id);
  // The simulated driver reports `simulated: true` for what it makes.
  expect(run.stdout).toBe(`${id} ${name} ${lease.resource_id} ${lease.slot} a100 true\n`);
  expect(run.stderr).toMatch(/^slipway: lease \d+ requested at /);
  expect(run.stderr).toMatch(/slipway: lease \d+ released: the command exited with status 7\n$/);
  const json = JSON.parse(await readFile(`${dir}/lease.json`, 'utf8'));
  expect(json).toMatchObject({
    lease: { id, blueprintName: name, state: 'active' },
    resource: { id: lease.resource_id },
    env: { SLIPWAY_LEASE_ID: String(id) },
  });
  await waitFor('the lease to be released', async () => gone((await leaseRow(id)).state));
  expect(await lastCommand(id)).toMatchObject({ kind: 'release', reason: 'the command exited with status 7', issued_by: 'token:user' });

  // A command killed by a signal: 128 + its number, as a shell says.
  const killed = await finished(leaseRun(['--blueprint', name, '--quiet', '--', 'sh', '-c', 'kill -USR1 $$']));
  expect(killed.code).toBe(128 + os.constants.signals.SIGUSR1);
  expect(killed.stderr).toBe('');

  // A command that is not there: 127, as a shell says, and the lease goes back.
  const missing = await finished(leaseRun(['--blueprint', name, '--', 'no-such-command-anywhere']));
  expect(missing.code).toBe(LEASE_RUN_EXIT.notFound);
  expect(missing.stderr).toMatch(/cannot run no-such-command-anywhere: command not found/);
  const missingId = leaseIdIn(missing.stderr);
  await waitFor('the lease to be released', async () => gone((await leaseRow(missingId)).state));
});

test('an operator releases the lease: the command gets SIGTERM at once, SIGKILL after the grace period, and lease run exits 124', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const { dir, marks } = await scratch();
  // It ignores SIGTERM (marking it), so only SIGKILL ends it.
  const script = `trap '${mark(dir, 'term')}' TERM; ${mark(dir, 'started')}; while true; do sleep 0.1; done`;
  const child = leaseRun(['--blueprint', name, '--grace', '1s', '--', 'sh', '-c', script]);
  const { text, done } = stderrOf(child);
  await waitFor('the command to start', async () => (await marks()).some((m) => m.startsWith('started')));
  const id = leaseIdIn(text());
  const releasedAt = Date.now();
  const answer = await env.as.operator.post(`/v1/leases/${id}/commands`, { kind: 'release', reason: 'the board is needed' });
  expect(answer.status).toBeLessThan(300);
  const run = await done;
  expect(run.code).toBe(LEASE_RUN_EXIT.ended);
  expect(run.stderr).toMatch(/lease \d+ ended while held: released by token:operator \(api\): the board is needed/);
  expect(run.stderr).toMatch(/stopping the command: SIGTERM, then SIGKILL after 1s/);
  const term = (await marks()).find((m) => m.startsWith('term'));
  expect(term).toBeDefined();
  // Its lease is read once a second: the SIGTERM follows the release within about that (a generous bound here; the figure is the design's).
  expect(Number(term!.split(' ')[1]) - releasedAt).toBeLessThan(10_000);
  // The command did not outlive lease run: SIGKILL ended it (a shell that ignores SIGTERM and is gone).
  expect(run.stdout).toBe('');
});

test("its blueprint's longest hold nears: the command gets SIGTERM at the notice, exits inside it, and its lease is released by its holder; lease run exits 124", async () => {
  // A 20 s longest hold: the notice comes 2 s ahead, and the lease is read once a second.
  const name = `held-20s-${Date.now()}`;
  const created = await env.as.admin.post('/v1/blueprints', { name, driver: 'simulated', maxResources: 1, leasesPerResource: 1, maxHoldMs: 20_000 });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const { dir, marks } = await scratch();
  const script = `trap '${mark(dir, 'term')}; exit 0' TERM; ${mark(dir, 'started')}; while true; do sleep 0.1; done`;
  const child = leaseRun(['--blueprint', name, '--grace', '10s', '--', 'sh', '-c', script]);
  const { text, done } = stderrOf(child);
  await waitFor('the command to start', async () => (await marks()).some((m) => m.startsWith('started')));
  const id = leaseIdIn(text());
  const run = await done;
  expect(run.code).toBe(LEASE_RUN_EXIT.ended);
  expect(run.stderr).toMatch(
    new RegExp(`lease ${id} is ending by .*: reached blueprint ${name}'s longest hold of 20s; stopping the command: SIGTERM`),
  );
  const term = (await marks()).find((m) => m.startsWith('term'));
  expect(term).toBeDefined();
  const lease = await leaseRow(id);
  // SIGTERM came with the notice, before the end.
  expect(Number(term!.split(' ')[1])).toBeLessThan(lease.end_by!.getTime());
  await waitFor('the lease to be released', async () => gone((await leaseRow(id)).state));
  // Its holder gave it back (the command's status is the reason), not the time limit.
  expect(await lastCommand(id)).toMatchObject({ kind: 'release', issued_by: 'token:user', reason: 'the command exited with status 0' });
});

test('preempted: the command gets SIGTERM, exits inside the grace period, and its lease is released by its holder; the slot goes to the urgent lease; lease run exits 124', async () => {
  const name = `preempting-${Date.now()}`;
  const preemption = { priorityMargin: 1, graceMs: 60_000 };
  const created = await env.as.admin.post('/v1/blueprints', { name, driver: 'simulated', maxResources: 1, leasesPerResource: 1, preemption });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const { dir, marks } = await scratch();
  const script = `trap '${mark(dir, 'term')}; exit 0' TERM; ${mark(dir, 'started')}; while true; do sleep 0.1; done`;
  const child = leaseRun(['--blueprint', name, '--priority', '1', '--grace', '10s', '--', 'sh', '-c', script]);
  const { text, done } = stderrOf(child);
  await waitFor('the command to start', async () => (await marks()).some((m) => m.startsWith('started')));
  const id = leaseIdIn(text());
  const urgent = await env.as.admin.post('/v1/leases', { blueprint: name, priority: 5 });
  expect(urgent.status, JSON.stringify(urgent.body)).toBe(202);
  const urgentId: number = urgent.body.lease.id;

  const run = await done;
  expect(run.code).toBe(LEASE_RUN_EXIT.ended);
  expect(run.stderr).toMatch(
    new RegExp(`lease ${id} is ending by .*: preempted for lease ${urgentId}: priority 5 against 1; .*stopping the command: SIGTERM`),
  );
  const term = (await marks()).find((m) => m.startsWith('term'));
  expect(term).toBeDefined();
  await waitFor('the lease to be released', async () => gone((await leaseRow(id)).state));
  const victim = await leaseRow(id);
  // SIGTERM came with the notice, inside the grace period.
  expect(Number(term!.split(' ')[1])).toBeLessThan(victim.end_by!.getTime());
  // Its holder gave it back (the command's status is the reason), not the preemption.
  expect(await lastCommand(id)).toMatchObject({ kind: 'release', issued_by: 'token:user', reason: 'the command exited with status 0' });
  const ends = await env.database.db
    .selectFrom('commands')
    .select(['issued_by', 'status'])
    .where('target_kind', '=', 'lease')
    .where('target_id', '=', id)
    .where('kind', '=', 'release')
    .execute();
  expect(ends.map((c) => c.issued_by)).toEqual(['token:user']);
  // The slot went to the lease it was taken for.
  await waitFor('the urgent lease to be active', async () => (await leaseRow(urgentId)).state === 'active');
  expect((await leaseRow(urgentId)).resource_id).toBe(victim.resource_id);
  expect((await env.as.admin.post(`/v1/leases/${urgentId}/commands?wait=30`, { kind: 'release' })).status).toBe(200);
});

test('lease run SIGKILLed: its lease is released once the heartbeat deadline passes', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const { dir, marks } = await scratch();
  const child = leaseRun([
    '--blueprint',
    name,
    '--heartbeat',
    '1s',
    '--',
    'sh',
    '-c',
    `${mark(dir, 'started')}; echo $$ > ${dir}/pid; exec sleep 60`,
  ]);
  const { text, done } = stderrOf(child);
  await waitFor('the command to start', async () => (await marks()).length > 0);
  const id = leaseIdIn(text());
  child.kill('SIGKILL');
  await once(child, 'exit');
  // The orphaned command is no business of this test (and holds lease run's stderr open until it ends).
  process.kill(Number(await readFile(`${dir}/pid`, 'utf8')), 'SIGKILL');
  await done;
  const row = await leaseRow(id);
  expect(row.state).toBe('active');
  // No collector runs here: the workers' timekeeper asks for the release once the deadline (two intervals) passes.
  await waitFor('the lease to be released for its heartbeat', async () => gone((await leaseRow(id)).state), 30_000);
  expect(await lastCommand(id)).toMatchObject({ kind: 'release', issued_by: 'system:gc' });
});

test('Ctrl-C while waiting leaves no lease behind; Ctrl-C while running goes to the command, and the lease is released after it', async () => {
  const { name } = await simulatedBlueprint(env.as.admin, {}, { maxResources: 1, leasesPerResource: 1 });
  const { dir, marks } = await scratch();
  const holder = leaseRun([
    '--blueprint',
    name,
    '--',
    'sh',
    '-c',
    `trap '${mark(dir, 'int')}; exit 3' INT; ${mark(dir, 'started')}; while true; do sleep 0.1; done`,
  ]);
  const holding = stderrOf(holder);
  await waitFor('the first command to start', async () => (await marks()).length > 0);

  const waiter = leaseRun(['--blueprint', name, '--', 'sh', '-c', mark(dir, 'waiter ran')]);
  const waiting = stderrOf(waiter);
  await waitFor('the second lease to wait in line', async () => /1st in line at/.test(waiting.text()));
  waiter.kill('SIGINT');
  const stopped = await waiting.done;
  expect(stopped.code).toBe(130);
  expect(stopped.stderr).toMatch(/stopped waiting for the lease/);
  const waiterId = leaseIdIn(stopped.stderr);
  await waitFor('the waiting lease to be released', async () => gone((await leaseRow(waiterId)).state));

  holder.kill('SIGINT');
  const run = await holding.done;
  expect(run.code).toBe(3);
  expect(await marks()).toEqual([expect.stringMatching(/^started /), expect.stringMatching(/^int /)]);
  const holderId = leaseIdIn(run.stderr);
  await waitFor('the lease to be released', async () => gone((await leaseRow(holderId)).state));
  expect(await lastCommand(holderId)).toMatchObject({ kind: 'release', reason: 'the command exited with status 3' });
});

test('refused, or not active by its wait deadline: the command never runs, and lease run exits with a status of its own', async () => {
  const refused = await finished(leaseRun(['--selector', 'nothing-has=this', '--', 'true']));
  expect(refused.code).toBe(LEASE_RUN_EXIT.refused);
  expect(refused.stdout).toBe('');
  expect(refused.stderr).toMatch(/can ever match selector/);

  const { name } = await simulatedBlueprint(env.as.admin, {}, { maxResources: 1, leasesPerResource: 1 });
  const held = await env.as.admin.post('/v1/leases?wait=30', { blueprint: name });
  const { dir, marks } = await scratch();
  // The deadline may pass before lease run has said where the lease waits: the outcome is what counts.
  const run = await finished(leaseRun(['--blueprint', name, '--wait-timeout', '1s', '--', 'sh', '-c', mark(dir, 'ran')]));
  expect(run.code, run.stderr).toBe(LEASE_RUN_EXIT.deadline);
  expect(run.stderr).toMatch(/was not active by its wait deadline/);
  expect(await marks()).toEqual([]);
  await env.as.admin.post(`/v1/leases/${held.body.lease.id}/commands`, { kind: 'release' });
});

test('the API server restarts while the command runs: the command runs on and its status passes through', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const config = (port: string) => loadConfig({ DATABASE_URL: env.database.url, LOG_LEVEL: 'warn', SLIPWAY_API_PORT: port });
  let server = await ApiServer.start(env.database, config('0'), testLog);
  const port = new URL(server.url).port;
  const { dir, marks } = await scratch();
  const child = leaseRun(
    ['--blueprint', name, '--heartbeat', '3s', '--', 'sh', '-c', `${mark(dir, 'started')}; sleep 6; ${mark(dir, 'finished')}; exit 5`],
    server.url,
  );
  const { text, done } = stderrOf(child);
  await waitFor('the command to start', async () => (await marks()).length > 0);
  await server.stop();
  await waitFor('lease run to notice', async () => /cannot be reached/.test(text()), 10_000);
  server = await ApiServer.start(env.database, config(port), testLog);
  try {
    const run = await done;
    expect(run.code, run.stderr).toBe(5);
    expect(await marks()).toEqual([expect.stringMatching(/^started /), expect.stringMatching(/^finished /)]);
    expect(run.stderr).toMatch(/Slipway can be reached again/);
    const id = leaseIdIn(run.stderr);
    await waitFor('the lease to be released', async () => gone((await leaseRow(id)).state));
  } finally {
    await server.stop();
  }
});

test('without SLIPWAY_URL it holds the lease on the database, the same way', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const run = await runCli(['lease', 'run', '--blueprint', name, '--quiet', '--', 'sh', '-c', 'echo "$SLIPWAY_LEASE_HOLDER"'], env.database.url);
  expect(run.code, run.stderr).toBe(0);
  expect(run.stdout).toBe(`${os.userInfo().username}@${os.hostname()}\n`);
});
