import { expect, test } from 'vitest';
import { createToken } from '../../src/api/auth/tokens.ts';
import { apiTestEnv } from './support/apiTestEnv.ts';
import { activeLease, simulatedBlueprint } from './support/fixtures.ts';

// Teams through the HTTP API: an admin makes them and their quotas, a
// token's leases count for its team, and a request that asked not to wait
// is refused with 429 at a reached quota.
const env = apiTestEnv({ worker: true });

/** A client whose token is a `user` of `team`. */
async function memberOf(team: string) {
  const { secret } = await createToken(env.database.db, { name: `${team}-user`, role: 'user', team }, 'test');
  return env.as.admin.withToken(secret);
}

test('an admin makes a team and sets its weight; its token’s leases count for it; GET /v1/teams shows it', async () => {
  const made = await env.as.admin.post('/v1/teams/ci', { weight: 3 });
  expect(made.status, JSON.stringify(made.body)).toBe(200);
  expect(made.body).toMatchObject({ name: 'ci', weight: 3, tokens: 0, counted: 0, waiting: 0, quotas: [], createdBy: 'token:admin' });
  const ci = await memberOf('ci');
  const blueprint = await simulatedBlueprint(env.as.admin);
  const lease = await activeLease(ci, blueprint.name);
  const shown = await env.as.viewer.get(`/v1/leases/${lease.id}`);
  expect(shown.body.lease.team).toBe('ci');
  const teams = await env.as.viewer.get('/v1/teams');
  expect(teams.status).toBe(200);
  expect(teams.body.items.find((t: { name: string }) => t.name === 'ci')).toMatchObject({ weight: 3, tokens: 1, counted: 1 });
  const detail = await env.as.viewer.get('/v1/teams/ci');
  expect(detail.body.changes).toEqual([
    expect.objectContaining({ type: 'created', message: 'made with weight 3', actor: 'token:admin', source: 'api' }),
  ]);
  await ci.post(`/v1/leases/${lease.id}/commands?wait=60`, { kind: 'release' });
});

test('a quota set through the API holds a request back; with queue: false the request is refused with 429 naming it', async () => {
  await env.as.admin.post('/v1/teams/qa', {});
  const qa = await memberOf('qa');
  const blueprint = await simulatedBlueprint(env.as.admin);
  const set = await env.as.admin.post('/v1/teams/qa/quotas', { blueprint: blueprint.name, maxLeases: 1 });
  expect(set.status, JSON.stringify(set.body)).toBe(200);
  expect(set.body.quotas).toEqual([expect.objectContaining({ blueprintName: blueprint.name, holder: null, maxLeases: 1, counted: 0 })]);
  const first = await activeLease(qa, blueprint.name);

  const refused = await qa.post('/v1/leases', { blueprint: blueprint.name, queue: false });
  expect(refused.status).toBe(429);
  expect(refused.body.code).toBe('over_quota');
  expect(refused.body.message).toBe(
    `team qa's quota of 1 lease at ${blueprint.name} is reached (1 counted); the request asked not to wait (queue: false), so no lease was made`,
  );

  const waiting = await qa.post('/v1/leases?wait=1', { blueprint: blueprint.name });
  expect(waiting.status).toBe(202);
  expect(waiting.body.lease.state).toBe('pending');
  // Removing the quota serves it.
  const removed = await env.as.admin.post('/v1/teams/qa/quotas/remove', { blueprint: blueprint.name });
  expect(removed.status, JSON.stringify(removed.body)).toBe(200);
  expect(removed.body.quotas).toEqual([]);
  await expect.poll(async () => (await qa.get(`/v1/leases/${waiting.body.lease.id}`)).body.lease.state, { timeout: 30_000 }).toBe('active');
  for (const id of [first.id, waiting.body.lease.id]) await qa.post(`/v1/leases/${id}/commands?wait=60`, { kind: 'release' });
});

test('bad team input is refused with 400 saying what would be right; only an admin may change teams', async () => {
  const weight = await env.as.admin.post('/v1/teams/ci', { weight: 0 });
  expect(weight.status).toBe(400);
  expect(weight.body.message).toBe('body.weight: expected a weight of 1 to 1000');
  const unknown = await env.as.admin.post('/v1/teams/nobody/quotas', { maxLeases: 1 });
  // As a missing blueprint is: 404, CLI exit 3.
  expect(unknown.status).toBe(404);
  expect(unknown.body.message).toBe('team nobody does not exist: make it with `slipway team set nobody` (or POST /v1/teams/nobody)');
  const missing = await env.as.admin.post('/v1/teams/ci/quotas/remove', { holder: 'token:nobody' });
  expect(missing.status).toBe(404);
  const forbidden = await env.as.operator.post('/v1/teams/ops', {});
  expect(forbidden.status).toBe(403);
  expect(forbidden.body.message).toBe('a operator token may not change teams, their weights or their quotas');
  expect((await env.as.viewer.get('/v1/teams/ops')).status).toBe(404);
});
