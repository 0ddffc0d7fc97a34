import { expect, test } from 'vitest';
import { runCli } from '../cli/runCli.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { apiTestEnv } from './support/apiTestEnv.ts';
import { activeLease, simulatedBlueprint } from './support/fixtures.ts';

/**
 * A command that live workers exist for but none runs is refused (409
 * unsupported_version, naming what they run), instead of queued to wait for
 * a worker that may never come; with no live worker at all, everything is
 * queued. The fleet is made "old" by the registry row an old worker would
 * write: one that advertises no `renew`.
 */
const env = apiTestEnv({ worker: true });

test('a command no live worker runs is refused with 409, naming the versions they run; with no live worker it is queued', async () => {
  const blueprint = await simulatedBlueprint(env.as.admin);
  const lease = await activeLease(env.as.admin, blueprint.name);
  await env.stopWorker();
  await env.database.db
    .insertInto('workers')
    .values({ id: 'old-worker', hostname: 'old', pid: 1, handles: JSON.stringify({ lease: { release: [1] } }) })
    .execute();

  // The registry is sampled once a second: the refusal comes once the sample has the old worker.
  const refused = await waitFor('the refusal', async () => {
    const answer = await env.as.admin.post(`/v1/leases/${lease.id}/commands`, { kind: 'renew' });
    return answer.status === 409 ? answer : undefined;
  });
  expect(refused.body).toMatchObject({
    code: 'unsupported_version',
    message: 'no live worker runs lease renew version 1; the 1 live worker(s) run no version of it: upgrade the workers first',
    details: { kind: 'renew', version: 1, liveVersions: [], liveWorkers: 1 },
  });
  expect(await env.database.db.selectFrom('commands').select('id').where('kind', '=', 'renew').execute()).toEqual([]);

  // The CLI refuses it the same way (exit 4, as for other refusals in the object's state).
  const cli = await runCli(['lease', 'renew', String(lease.id)], env.database.url);
  expect(cli.code).toBe(4);
  expect(cli.stderr).toBe('error: no live worker runs lease renew version 1; the 1 live worker(s) run no version of it: upgrade the workers first\n');

  // What the old worker runs is taken.
  const release = await env.as.admin.post(`/v1/leases/${lease.id}/commands`, { kind: 'release', version: 1 });
  expect(release.status, JSON.stringify(release.body)).toBe(202);

  // No live worker at all: queued, to wait for one.
  await env.database.db.deleteFrom('workers').where('id', '=', 'old-worker').execute();
  const other = await pendingLease(blueprint.name);
  const queued = await waitFor('the renewal to be queued', async () => {
    const answer = await env.as.admin.post(`/v1/leases/${other}/commands`, { kind: 'renew' });
    return answer.status === 202 ? answer : undefined;
  });
  expect(queued.body.command.status).toBe('queued');
});

/** A lease made while no worker runs: it stays pending, which renew accepts too. */
async function pendingLease(blueprint: string): Promise<number> {
  const created = await env.as.admin.post('/v1/leases', { blueprint });
  expect(created.status, JSON.stringify(created.body)).toBe(202);
  return created.body.lease.id;
}
