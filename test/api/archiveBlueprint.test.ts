import { expect, test } from 'vitest';
import { runCli } from '../cli/runCli.ts';
import { apiTestEnv } from './support/apiTestEnv.ts';
import { activeLease, simulatedBlueprint } from './support/fixtures.ts';

/**
 * A blueprint done with is archived: refused while anything of it is live,
 * then out of the lists for good, its history kept.
 */
const env = apiTestEnv({ worker: true });

test('archiving waits for nothing of the blueprint to be live, then takes it out of the lists for good, keeping its history', async () => {
  const { name, id } = await simulatedBlueprint(env.as.admin);
  const lease = await activeLease(env.as.user, name);

  const early = await env.as.admin.post(`/v1/blueprints/${name}/archive`, {});
  expect(early.status).toBe(409);
  expect(early.body.message).toMatch(/still has 1 live lease\(s\) and 1 live resource\(s\)/);
  expect(early.body.details).toMatchObject({ liveLeases: 1, liveResources: 1 });

  await env.as.admin.post(`/v1/leases/${lease.id}/commands?wait=30`, { kind: 'release' });
  await env.as.admin.post(`/v1/resources/${lease.resourceId}/commands?wait=30`, { kind: 'release', reason: 'done with the pool' });
  const archived = await env.as.admin.post(`/v1/blueprints/${name}/archive`, {});
  expect(archived.status, JSON.stringify(archived.body)).toBe(200);
  expect(archived.body.state).toBe('archived');

  // Out of the lists of live blueprints, in its own; its page and history stay.
  const names = async (query: string) =>
    (await env.as.admin.get(`/v1/blueprints?limit=1000${query}`)).body.items.map((b: { name: string }) => b.name);
  expect(await names('')).not.toContain(name);
  expect(await names('&state=archived')).toContain(name);
  const shown = await env.as.admin.get(`/v1/blueprints/${id}`);
  expect(shown.body.timeline.entries.filter((e: { type: string }) => e.type === 'event').at(-1)).toMatchObject({
    fromState: 'enabled',
    toState: 'archived',
    who: 'token:admin',
  });

  // For good: no lease, no change, no way back.
  expect((await env.as.user.post('/v1/leases', { blueprint: name })).status).toBe(409);
  const patched = await env.as.admin.call('PATCH', `/v1/blueprints/${name}`, { body: { maxResources: 5 } });
  expect(patched.status).toBe(409);
  expect(patched.body.message).toMatch(/is archived: it is kept for its history and changes no more/);
  expect((await env.as.admin.post(`/v1/blueprints/${name}/enable`, {})).status).toBe(409);

  // The CLI lists the same way.
  const listed = await runCli(['blueprint', 'list', '--limit', '1000'], env.database.url);
  expect(listed.stdout).not.toContain(name);
  expect((await runCli(['blueprint', 'list', '--state', 'archived', '--limit', '1000'], env.database.url)).stdout).toContain(name);
});
