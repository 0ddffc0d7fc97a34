import { sql } from 'kysely';
import { expect, test } from 'vitest';
import { ApiClient } from './support/ApiClient.ts';
import { apiTestEnv } from './support/apiTestEnv.ts';
import { activeLease, simulatedBlueprint } from './support/fixtures.ts';

/** Backpressure (429 for a full queue, 503 for a full backlog) and the limit on failed authentication. */
const env = apiTestEnv({ worker: true });

async function commandCount(): Promise<number> {
  const { rows } = await sql<{ n: number }>`select count(*)::int as n from commands`.execute(env.database.db);
  return rows[0]!.n;
}

test('a full queue is 429 and a full backlog 503, both with Retry-After and nothing written', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const first = await activeLease(env.as.operator, name);
  const second = await activeLease(env.as.operator, name);
  const queueOfOne = new ApiClient((await env.startServer({ SLIPWAY_API_QUEUE_DEPTH_LIMIT: '1' })).url, env.as.operator.token);
  const backlogOfOne = new ApiClient((await env.startServer({ SLIPWAY_API_BACKLOG_LIMIT: '1' })).url, env.as.operator.token);
  // No worker: what is queued stays queued.
  await env.stopWorker();
  try {
    expect((await queueOfOne.post(`/v1/leases/${first.id}/commands`, { kind: 'release' })).status).toBe(202);
    const before = await commandCount();

    // Even a duplicate that would have joined the queued release is turned away: nothing is written.
    const full = await queueOfOne.post(`/v1/leases/${first.id}/commands`, { kind: 'release' });
    expect(full.status).toBe(429);
    expect(full.body).toMatchObject({ code: 'too_many_requests', details: { depth: 1, limit: 1 } });
    expect(full.headers.get('retry-after')).toBe('1');

    for (const [path, body] of [
      [`/v1/leases/${second.id}/commands`, { kind: 'release' }],
      ['/v1/leases', { blueprint: name }],
    ] as const) {
      const refused = await backlogOfOne.post(path, body);
      expect(refused.status).toBe(503);
      expect(refused.body.code).toBe('backlog_full');
      expect(refused.headers.get('retry-after')).toBe('5');
    }
    expect(await commandCount()).toBe(before);
  } finally {
    await env.startWorker();
  }
});

test('failed authentication is limited per client address: over the limit, 429 before any token is looked at', async () => {
  const strict = await env.startServer({ SLIPWAY_API_AUTH_FAILURES_PER_MINUTE: '3' });
  const guesser = new ApiClient(strict.url, 'slw_guess');
  for (let i = 0; i < 3; i++) expect((await guesser.get('/v1/leases')).status).toBe(401);
  const limited = await guesser.get('/v1/leases');
  expect(limited.status).toBe(429);
  expect(limited.body.code).toBe('too_many_requests');
  expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
  // The address is limited, whatever token it now sends; public probes still answer.
  expect((await guesser.withToken(env.as.admin.token).get('/v1/leases')).status).toBe(429);
  expect((await guesser.get('/healthz')).status).toBe(200);
  // Another server process keeps its own count.
  expect((await env.as.admin.get('/v1/leases')).status).toBe(200);
});

test('a blueprint disabled through the API takes no new lease (409); enabled again, it does', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const disabled = await env.as.admin.post(`/v1/blueprints/${name}/disable`);
  expect(disabled.body).toMatchObject({ name, state: 'disabled' });
  const refused = await env.as.user.post('/v1/leases', { blueprint: name });
  expect(refused.status).toBe(409);
  expect(refused.body.message).toMatch(/is disabled; it takes no new leases/);
  expect((await env.as.admin.post(`/v1/blueprints/${name}/disable`)).status).toBe(409);
  expect((await env.as.admin.post(`/v1/blueprints/${name}/enable`)).body.state).toBe('enabled');
  // Each change of state is an event that says what it means for new leases.
  const { timeline } = (await env.as.admin.get(`/v1/blueprints/${name}`)).body;
  const changes = timeline.entries.filter((e: { type: string; fromState: string | null }) => e.type === 'event' && e.fromState !== null);
  expect(changes.map((e: { fromState: string; toState: string; message: string }) => [e.fromState, e.toState, e.message])).toEqual([
    ['enabled', 'disabled', 'disabled: no new leases'],
    ['disabled', 'enabled', 'enabled'],
  ]);
  const paths = (await env.anonymous.get('/v1/openapi.json')).body.paths;
  expect(paths['/v1/blueprints/{ref}/disable'].post).toMatchObject({
    summary: 'Disable a blueprint',
    description: expect.stringMatching(/takes no new leases; the leases it has carry on/),
  });
  expect(paths['/v1/blueprints/{ref}/enable'].post.summary).toBe('Enable a blueprint');
  const changed = await env.as.admin.call('PATCH', `/v1/blueprints/${name}`, { body: { maxResources: 3 } });
  expect(changed.status).toBe(200);
  expect(changed.body).toMatchObject({ maxResources: 3, leasesPerResource: 4 });
  await activeLease(env.as.user, name);
});

test('driver settings change only through the blueprint queue, where its resources are reconciled', async () => {
  const { name, id } = await simulatedBlueprint(env.as.admin);
  const direct = await env.as.admin.call('PATCH', `/v1/blueprints/${name}`, {
    body: { maxResources: 5, settings: { latencyMs: { min: 1, max: 2 } } },
  });
  expect(direct.status).toBe(400);
  expect(direct.body.message).toMatch(/update_settings command \(POST \/v1\/blueprints\/\{id\}\/commands/);
  const untouched = (await env.as.admin.get(`/v1/blueprints/${name}`)).body.blueprint;
  expect(untouched.maxResources).toBe(10);
  // Created with no settings, it stores none: the driver's defaults are the code's (docs/upgrades.md).
  expect(untouched.settings).toEqual({});

  const body = { kind: 'update_settings', reason: 'slower', payload: { settings: { latencyMs: { min: 1, max: 2 } } } };
  expect((await env.as.operator.post(`/v1/blueprints/${id}/commands`, body)).status).toBe(403);
  const queued = await env.as.admin.post(`/v1/blueprints/${id}/commands?wait=60`, body);
  expect(queued.status, JSON.stringify(queued.body)).toBe(200);
  expect(queued.body.command).toMatchObject({ kind: 'update_settings', status: 'done', issuedBy: 'token:admin', source: 'api', reason: 'slower' });
  expect((await env.as.admin.get(`/v1/blueprints/${name}`)).body.blueprint.settings).toEqual({ latencyMs: { min: 1, max: 2 } });

  // Settings the driver refuses are refused before anything is queued, and the blueprint keeps the ones it had.
  const queuedBefore = (await env.as.admin.get(`/v1/commands?target=blueprint:${id}`)).body.items.length;
  const wrong = await env.as.admin.post(`/v1/blueprints/${id}/commands?wait=60`, {
    kind: 'update_settings',
    payload: { settings: { latencyMs: 'fast' } },
  });
  expect(wrong.status).toBe(400);
  expect(wrong.body.message).toMatch(/invalid settings for the simulated driver: settings\.latencyMs/);
  expect((await env.as.admin.get(`/v1/commands?target=blueprint:${id}`)).body.items).toHaveLength(queuedBefore);
  expect((await env.as.admin.get(`/v1/blueprints/${name}`)).body.blueprint.settings).toEqual({ latencyMs: { min: 1, max: 2 } });
});
