import { sql } from 'kysely';
import { expect, test } from 'vitest';
import type { ObjectKind } from '../../migrations/schema.ts';
import { signalWorkersOnCommit } from '../../src/queue/appendCommand.ts';
import { runCli } from '../cli/runCli.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { apiTestEnv } from './support/apiTestEnv.ts';
import { activeLease, simulatedBlueprint } from './support/fixtures.ts';

/**
 * Cordon and uncordon, and their old names drain and undrain (decision
 * 0036): the new names work; the old ones still work through the API (with
 * a Deprecation header) and the CLI (hidden, with a notice on stderr), and
 * are appended as the new ones; and an old name that a process of the
 * release before stored is still run by this release's worker.
 */
const env = apiTestEnv({ worker: true });

/** RFC 9745's form of the day the old names were deprecated. */
const DEPRECATED = `@${Date.parse('2026-12-07') / 1000}`;

const stateOf = async (table: 'resources' | 'leases', id: number) =>
  (await env.database.db.selectFrom(table).select('state').where('id', '=', id).executeTakeFirstOrThrow()).state;

/** The kinds stored on an object's queue, oldest first, with their statuses. */
const storedKinds = async (kind: ObjectKind, id: number) =>
  (
    await env.database.db
      .selectFrom('commands')
      .select(['kind', 'status'])
      .where('target_kind', '=', kind)
      .where('target_id', '=', id)
      .where('kind', 'in', ['cordon', 'uncordon', 'drain', 'undrain'])
      .orderBy('id')
      .execute()
  ).map(({ kind, status }) => `${kind} ${status}`);

/** POSTs `kind` to the object's queue as an admin and waits for it to settle. */
async function ask(target: 'resources' | 'blueprints', id: number, kind: string) {
  const answer = await env.as.admin.post(`/v1/${target}/${id}/commands?wait=30`, { kind, reason: 'kernel update' });
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  expect(answer.body.outcome).toBe('settled');
  return answer;
}

/**
 * Appends `kind` as an API server of the release before does: stored under
 * its own name, by slipway_append_command itself (this release's append
 * stores an old name as its new one).
 */
async function appendAsReleaseBefore(kind: ObjectKind, id: number, commandKind: string): Promise<void> {
  const { db } = env.database;
  await sql`select f.part from slipway_append_command(${kind}::text, ${id}::bigint, null::text[], ${commandKind}::text, 1, '{}'::jsonb,
    'token:old', 'api', 'from the release before', null, null, null, null::bigint, ${commandKind}::text, null::timestamptz, 'wake') as f`.execute(db);
  await signalWorkersOnCommit(db, { kind, id });
}

test('cordon and uncordon, and their old names through the API: appended as the new ones, the old names answered with a Deprecation header', async () => {
  const { name } = await simulatedBlueprint(env.as.admin, {}, { maxResources: 1, leasesPerResource: 2 });
  const lease = await activeLease(env.as.user, name);
  const id = lease.resourceId;

  const cordoned = await ask('resources', id, 'cordon');
  expect(cordoned.headers.get('deprecation')).toBeNull();
  expect(cordoned.body).toMatchObject({ state: 'maintenance', command: { kind: 'cordon', status: 'done' } });
  expect(await stateOf('leases', lease.id)).toBe('active');
  const uncordoned = await ask('resources', id, 'uncordon');
  expect(uncordoned.headers.get('deprecation')).toBeNull();
  expect(uncordoned.body).toMatchObject({ state: 'active', command: { kind: 'uncordon', status: 'done' } });

  const drained = await ask('resources', id, 'drain');
  expect(drained.headers.get('deprecation')).toBe(DEPRECATED);
  expect(drained.body).toMatchObject({ state: 'maintenance', command: { kind: 'cordon', status: 'done' } });
  // Refused in maintenance as cordon is, pointing at the cordon that did it.
  const again = await env.as.admin.post(`/v1/resources/${id}/commands`, { kind: 'drain' });
  expect(again.status).toBe(409);
  expect(again.body.message).toContain(`(command ${drained.body.command.id} already did it)`);
  const undrained = await ask('resources', id, 'undrain');
  expect(undrained.headers.get('deprecation')).toBe(DEPRECATED);
  expect(undrained.body).toMatchObject({ state: 'active', command: { kind: 'uncordon', status: 'done' } });

  expect(await storedKinds('resource', id)).toEqual(['cordon done', 'uncordon done', 'cordon done', 'uncordon done']);
  expect(await stateOf('leases', lease.id)).toBe('active');
});

test("a blueprint's cordon and uncordon, old names or new, send cordon and uncordon to each of its resources", async () => {
  const { name, id } = await simulatedBlueprint(env.as.admin, {}, { maxResources: 2, leasesPerResource: 1 });
  const leases = [await activeLease(env.as.user, name), await activeLease(env.as.user, name)];
  const resourceIds = leases.map((l) => l.resourceId);
  const states = async () => Promise.all(resourceIds.map((r) => stateOf('resources', r)));

  for (const [kind, appended, state] of [
    ['drain', 'cordon', 'maintenance'],
    ['uncordon', 'uncordon', 'active'],
    ['cordon', 'cordon', 'maintenance'],
    ['undrain', 'uncordon', 'active'],
  ] as const) {
    const answer = await ask('blueprints', id, kind);
    expect(answer.headers.get('deprecation')).toBe(kind === appended ? null : DEPRECATED);
    // The blueprint's command and one per resource that it caused, all under the new name.
    expect(answer.body.tree.map((c: { kind: string; targetKind: string }) => `${c.targetKind} ${c.kind}`)).toEqual([
      `blueprint ${appended}`,
      `resource ${appended}`,
      `resource ${appended}`,
    ]);
    expect(await states(), kind).toEqual([state, state]);
  }
  expect(await storedKinds('blueprint', id)).toEqual(['cordon done', 'uncordon done', 'cordon done', 'uncordon done']);
});

test('drain and undrain stored by a process of the release before are run by this release', async () => {
  const { name, id: blueprintId } = await simulatedBlueprint(env.as.admin, {}, { maxResources: 1, leasesPerResource: 1 });
  const { resourceId } = await activeLease(env.as.user, name);

  await appendAsReleaseBefore('resource', resourceId, 'drain');
  await waitFor('the resource in maintenance', async () => (await stateOf('resources', resourceId)) === 'maintenance');
  expect(await storedKinds('resource', resourceId)).toEqual(['drain done']);

  // A blueprint's old undrain fans out this release's uncordon.
  await appendAsReleaseBefore('blueprint', blueprintId, 'undrain');
  await waitFor('the resource active again', async () => (await stateOf('resources', resourceId)) === 'active');
  expect(await storedKinds('blueprint', blueprintId)).toEqual(['undrain done']);
  expect(await storedKinds('resource', resourceId)).toEqual(['drain done', 'uncordon done']);
});

test('the CLI: cordon and uncordon are listed; drain and undrain are hidden, still work, and say what to use instead', async () => {
  const { name } = await simulatedBlueprint(env.as.admin, {}, { maxResources: 1, leasesPerResource: 1 });
  const { resourceId } = await activeLease(env.as.user, name);
  const local = (...args: string[]) => runCli(args, env.database.url);

  for (const group of ['resource', 'blueprint']) {
    const help = await local(group, '--help');
    expect(help.stdout).toMatch(/^ {2}cordon /m);
    expect(help.stdout).toMatch(/^ {2}uncordon /m);
    expect(help.stdout).not.toMatch(/drain/);
  }

  const cordoned = await local('resource', 'cordon', String(resourceId));
  expect(cordoned.stderr).toBe('');
  expect(cordoned.code).toBe(0);
  expect(cordoned.stdout).toMatch(
    new RegExp(`^#\\d+ cordon resource:${resourceId} → done: in maintenance: takes no new leases; its 1 lease\\(s\\) carry on$`, 'm'),
  );
  expect((await local('resource', 'uncordon', String(resourceId))).code).toBe(0);

  const drained = await local('resource', 'drain', String(resourceId));
  expect(drained.stderr).toBe('warning: "slipway resource drain" is deprecated: use "slipway resource cordon"\n');
  expect(drained.code).toBe(0);
  expect(drained.stdout).toMatch(new RegExp(`^#\\d+ cordon resource:${resourceId} → done: in maintenance`, 'm'));
  expect(await stateOf('resources', resourceId)).toBe('maintenance');
  const undrained = await local('resource', 'undrain', String(resourceId));
  expect(undrained.stderr).toBe('warning: "slipway resource undrain" is deprecated: use "slipway resource uncordon"\n');
  expect(undrained.code).toBe(0);
  expect(await stateOf('resources', resourceId)).toBe('active');

  const blueprintDrain = await local('blueprint', 'drain', name);
  expect(blueprintDrain.stderr).toBe('warning: "slipway blueprint drain" is deprecated: use "slipway blueprint cordon"\n');
  expect(blueprintDrain.code).toBe(0);
  expect(await stateOf('resources', resourceId)).toBe('maintenance');
  expect((await local('blueprint', 'uncordon', name)).code).toBe(0);
  expect(await stateOf('resources', resourceId)).toBe('active');
  expect(await storedKinds('resource', resourceId)).toEqual(Array(3).fill(['cordon done', 'uncordon done']).flat());
});

test('while only workers of the release before are live, an old name is refused as its new one is: it would be stored as a kind none of them runs', async () => {
  const { name } = await simulatedBlueprint(env.as.admin, {}, { maxResources: 1, leasesPerResource: 1 });
  const { resourceId } = await activeLease(env.as.user, name);
  await env.stopWorker();
  // The registry row a worker of the release before writes: it runs drain and undrain, and no cordon.
  await env.database.db
    .insertInto('workers')
    .values({ id: 'old-worker', hostname: 'old', pid: 1, handles: JSON.stringify({ resource: { drain: [1], undrain: [1] } }) })
    .execute();

  // The registry is sampled once a second: the refusal comes once the sample has the old worker.
  const refused = await waitFor('the refusal', async () => {
    const answer = await env.as.admin.post(`/v1/resources/${resourceId}/commands`, { kind: 'drain' });
    return answer.status === 409 ? answer : undefined;
  });
  expect(refused.body).toMatchObject({
    code: 'unsupported_version',
    message: 'no live worker runs resource cordon version 1; the 1 live worker(s) run no version of it: upgrade the workers first',
  });
  expect(await storedKinds('resource', resourceId)).toEqual([]);
});
