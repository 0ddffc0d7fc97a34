import { beforeAll, expect, test } from 'vitest';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { cliTestEnv } from './cliTestEnv.ts';
import { parseJson } from './runCli.ts';

const env = cliTestEnv();
const actor = { issuedBy: 'tester', source: 'cli' } as const;
let leaseId: number;
let releaseId: number;

beforeAll(async () => {
  const db = env.database.db;
  await createBlueprint(db, { name: 'sim', driver: 'simulated', maxResources: 2 }, actor);
  await createBlueprint(db, { name: 'sluggish', driver: 'simulated', maxResources: 1, settings: { latencyMs: { min: 5000, max: 5000 } } }, actor);
  leaseId = parseJson(await env.cli('--json', 'lease', 'create', '--blueprint', 'sim')).lease.id;
  releaseId = parseJson(await env.cli('--json', 'lease', 'release', String(leaseId))).command.id;
});

test('command show prints the command, its outcome and the tree it caused, with timing', async () => {
  const run = await env.cli('command', 'show', String(releaseId));
  expect(run.code).toBe(0);
  expect(run.stdout).toMatch(new RegExp(`^command #${releaseId} release lease:${leaseId}: done\\n {2}message +released and destroyed\\n`));
  expect(run.stdout).toMatch(/issued by +\S+@\S+ via cli/);
  const tree = run.stdout.slice(run.stdout.indexOf('what it caused'));
  expect(tree).toMatch(/COMMAND +KIND +TARGET +STATUS +QUEUED +TOOK +MESSAGE/);
  // Each command indented under the one that caused it, with when it was queued and how long it took.
  expect(tree).toMatch(new RegExp(`\\n {2}#${releaseId} +release +lease:${leaseId} +done +\\+0\\.000s +\\d+\\.\\d{3}s +released and destroyed\\n`));
  // The return of the resource's only slot asked it to count them.
  expect(tree).toMatch(/\n {4}#\d+ +count_slots +resource:\d+ +done +\+\d+\.\d{3}s +\d+\.\d{3}s +no slot taken/);
});

test('command show --json gives the command and its tree', async () => {
  const result = parseJson(await env.cli('--json', 'command', 'show', String(releaseId)));
  expect(result.command).toMatchObject({ id: releaseId, kind: 'release', status: 'done', source: 'cli' });
  expect(result.tree.map((c: { kind: string; depth: number }) => [c.depth, c.kind])).toEqual(
    expect.arrayContaining([
      [0, 'release'],
      [1, 'count_slots'],
    ]),
  );
});

test('command list filters by target, kind and status, and pages on id', async () => {
  const onLease = parseJson(await env.cli('--json', 'command', 'list', '--target', `lease:${leaseId}`));
  expect(onLease.items.map((c: { kind: string }) => c.kind)).toEqual(['release', 'grant']);
  const oldestFirst = parseJson(await env.cli('--json', 'command', 'list', '--target', `lease:${leaseId}`, '--order', 'oldest'));
  expect(oldestFirst.items.map((c: { kind: string }) => c.kind)).toEqual(['grant', 'release']);

  const releases = await env.cli('command', 'list', '--kind', 'release', '--status', 'done');
  expect(releases.code).toBe(0);
  expect(releases.stdout).toMatch(/^ID +TARGET +KIND +STATUS +BY +CREATED +MESSAGE\n/);
  expect(releases.stdout).toMatch(new RegExp(`^${releaseId} +lease:${leaseId} +release +done +\\S+ \\(cli\\)`, 'm'));
  expect(releases.stdout.trim().split('\n')).toHaveLength(2);

  const page = await env.cli('command', 'list', '--limit', '2');
  expect(page.stdout).toMatch(/\n\(more: add --after \d+\)\n$/);
});

test('a wait that runs out of time exits non-zero and says the command carries on', async () => {
  const run = await env.cli('lease', 'create', '--blueprint', 'sluggish', '--timeout', '1');
  expect(run.code).toBe(1);
  const [, lease, root] = /^lease (\d+) requested for \S+ \(command (\d+)\)$/m.exec(run.stdout) ?? [];
  // Still being set up (its 5 s driver call runs): which state it has reached depends on the worker's pace.
  expect(run.stderr).toMatch(
    new RegExp(
      `^error: timed out after 1s; lease ${lease} is still (pending|acquired); command ${root} carries on ` +
        `\\(see \`slipway command show ${root}\`\\); release the lease with: slipway lease release ${lease}\n$`,
    ),
  );
  // And it does carry on, to an active lease. Waiting for that also keeps
  // the worker from being stopped, and the database dropped, in the middle
  // of one of its 5 s driver calls.
  const active = await waitFor('the lease to become active', async () => {
    const row = await env.database.db.selectFrom('leases').select('state').where('id', '=', Number(lease)).executeTakeFirst();
    return row?.state === 'active';
  });
  expect(active).toBe(true);
});
