import { sql } from 'kysely';
import { expect, test } from 'vitest';
import { slipwayVersion } from '../../src/version.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { apiTestEnv } from './support/apiTestEnv.ts';
import { activeLease, simulatedBlueprint } from './support/fixtures.ts';

/**
 * The asynchronous contract, one real request per answer: 202 + Location,
 * 200 for a duplicate and for a settled wait, 404, 409 with the reason, the
 * wait's three endings, cancel, and the probes.
 */
const env = apiTestEnv({ worker: true });

test('healthz, readyz and the OpenAPI document answer without a token', async () => {
  expect((await env.anonymous.get('/healthz')).body).toEqual({ status: 'ok', version: slipwayVersion() });
  expect(slipwayVersion()).toMatch(/^\d+\.\d+\.\d+(\+[0-9a-f]{12})?$/);
  expect((await env.anonymous.get('/readyz')).body).toMatchObject({ status: 'ready', parts: { listen: { state: 'up' } } });
  const doc = await env.anonymous.get('/v1/openapi.json');
  expect(doc.status).toBe(200);
  expect(doc.body.openapi).toBe('3.1.0');
  const create = doc.body.paths['/v1/leases'].post;
  // A blueprint, a selector or both: neither field is required alone.
  expect(create.requestBody.content['application/json'].schema.required).toBeUndefined();
  expect(Object.keys(create.requestBody.content['application/json'].schema.properties)).toEqual(expect.arrayContaining(['blueprint', 'selector']));
  expect(create.requestBody.content['application/json'].schema.additionalProperties).toBe(false);
  expect(doc.body.paths['/v1/leases/{id}/commands'].post.parameters.map((p: { name: string }) => p.name).sort()).toEqual([
    'Idempotency-Key',
    'id',
    'wait',
  ]);
  // Every answer is described: a lease's GET by the Lease schema, which is camelCase like the requests.
  const shown = doc.body.paths['/v1/leases/{id}'].get.responses;
  expect(shown['200'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/LeaseDetail' });
  expect(shown['404'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/Error' });
  expect(doc.body.components.schemas.LeaseDetail.properties.lease).toEqual({ $ref: '#/components/schemas/Lease' });
  expect(doc.body.components.schemas.Lease.properties.expiresAt).toMatchObject({
    anyOf: [{ type: 'string', format: 'date-time' }, { type: 'null' }],
  });
  // The expiry fields and the callback are in the document, as the server validates them.
  const createFields = create.requestBody.content['application/json'].schema.properties;
  expect(createFields.expiresAt).toMatchObject({ type: 'string', format: 'date-time' });
  expect(createFields.expiresInMs).toMatchObject({ type: 'integer', minimum: 1000 });
  expect(createFields.heartbeatMs).toMatchObject({ type: 'integer', minimum: 1000 });
  for (const path of ['/v1/leases/{id}/commands', '/v1/resources/{id}/commands']) {
    const body = doc.body.paths[path].post.requestBody.content['application/json'].schema;
    expect(body.properties.callback).toMatchObject({
      type: 'object',
      required: ['url'],
      properties: { url: { type: 'string' } },
      additionalProperties: false,
    });
  }
});

test('a release is accepted with 202 and Location; its status is readable there', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const lease = await activeLease(env.as.user, name);
  expect(lease.holder).toBe('token:user');

  const release = await env.as.user.post(`/v1/leases/${lease.id}/commands`, { kind: 'release', reason: 'done with it' });
  expect(release.status).toBe(202);
  expect(release.headers.get('location')).toBe(`/v1/commands/${release.body.command.id}`);
  expect(release.body.coalesced).toBe(false);
  const command = release.body.command;
  expect(command).toMatchObject({ kind: 'release', issuedBy: 'token:user', source: 'api', reason: 'done with it' });
  expect(command.clientAddress).toMatch(/127\.0\.0\.1/);
  expect(command.userAgent).toBeTruthy();
  expect(command.requestId).toBe(release.headers.get('x-request-id'));

  const shown = await env.as.viewer.get(release.headers.get('location')!);
  expect(shown.status).toBe(200);
  expect(shown.body.command.id).toBe(command.id);
  expect(shown.body.tree[0].id).toBe(command.id);
});

test('a duplicate release answers 200 with the command already in flight', async () => {
  const { name } = await simulatedBlueprint(env.as.admin, { operationLatencyMs: { releaseLease: 3000 } });
  const lease = await activeLease(env.as.operator, name);
  const first = await env.as.operator.post(`/v1/leases/${lease.id}/commands`, { kind: 'release' });
  const second = await env.as.operator.post(`/v1/leases/${lease.id}/commands`, { kind: 'release' });
  expect(first.status).toBe(202);
  expect(second.status).toBe(200);
  expect(second.body.coalesced).toBe(true);
  expect(second.body.command.id).toBe(first.body.command.id);
  expect(second.body.record).toMatchObject({ status: 'coalesced', coalescedInto: first.body.command.id });
  expect(second.headers.get('location')).toBe(`/v1/commands/${first.body.command.id}`);
});

test('wait returns when the tree has settled: success', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const lease = await activeLease(env.as.operator, name);
  const release = await env.as.operator.post(`/v1/leases/${lease.id}/commands?wait=60`, { kind: 'release' });
  expect(release.status).toBe(200);
  expect(release.body.outcome).toBe('settled');
  expect(release.body.state).toBe('destroyed');
  expect(release.body.tree.map((c: { status: string }) => c.status).every((s: string) => s === 'done')).toBe(true);
});

test('wait returns when the tree has settled: failure, and the body says so', async () => {
  const { name } = await simulatedBlueprint(env.as.admin, { permanentFailureRate: 1, failOperations: ['releaseLease'] });
  const lease = await activeLease(env.as.operator, name);
  const release = await env.as.operator.post(`/v1/leases/${lease.id}/commands?wait=60`, { kind: 'release' });
  expect(release.status).toBe(200);
  expect(release.body.outcome).toBe('settled');
  expect(release.body.command.status).toBe('failed');
  expect(release.body.command.message).toMatch(/simulated permanent failure in releaseLease/);
});

test('wait returns at its timeout with 202, saying the command is still under way', async () => {
  const { name } = await simulatedBlueprint(env.as.admin, { operationLatencyMs: { releaseLease: 4000 } });
  const lease = await activeLease(env.as.operator, name);
  const release = await env.as.operator.post(`/v1/leases/${lease.id}/commands?wait=0.5`, { kind: 'release' });
  expect(release.status).toBe(202);
  expect(release.body.outcome).toBe('timed_out');
  expect(['queued', 'running']).toContain(release.body.command.status);
});

test('lease create with wait answers once the lease is active', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const created = await env.as.user.post('/v1/leases?wait=60', { blueprint: name, attributes: { team: 'ci' } });
  expect(created.status).toBe(200);
  expect(created.body.outcome).toBe('settled');
  expect(created.body.lease).toMatchObject({ state: 'active', holder: 'token:user', blueprintName: name });
  expect(created.body.lease.attributes).toMatchObject({ team: 'ci', simulated: true });
});

test("lease create takes a priority within the caller's role's range; above it, a 403 naming the range, and nothing written", async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const asUser = await env.as.user.post('/v1/leases', { blueprint: name, priority: 4 });
  expect(asUser.status, JSON.stringify(asUser.body)).toBe(202);
  expect(asUser.body.lease.priority).toBe(4);
  const before = await env.database.db
    .selectFrom('leases')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirstOrThrow();
  const tooHigh = await env.as.user.post('/v1/leases', { blueprint: name, priority: 7 });
  expect(tooHigh.status).toBe(403);
  expect(tooHigh.body).toMatchObject({ code: 'forbidden', message: 'a user token may ask for priority 0 to 4, not 7: ask an operator' });
  const after = await env.database.db
    .selectFrom('leases')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirstOrThrow();
  expect(Number(after.n)).toBe(Number(before.n));
  const asOperator = await env.as.operator.post('/v1/leases', { blueprint: name, priority: 9 });
  expect(asOperator.body.lease.priority).toBe(9);
  expect((await env.as.user.post('/v1/leases', { blueprint: name })).body.lease.priority).toBe(0);
});

test('lease create takes a wait timeout: the lease shows its wait deadline, counted from its creation', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const created = await env.as.user.post('/v1/leases', { blueprint: name, waitTimeoutMs: 600_000 });
  expect(created.status, JSON.stringify(created.body)).toBe(202);
  const { lease } = created.body;
  expect(Date.parse(lease.waitDeadline) - Date.parse(lease.createdAt)).toBe(600_000);
  const plain = await env.as.user.post('/v1/leases', { blueprint: name });
  expect(plain.body.lease.waitDeadline).toBeNull();
});

test('lease create takes an expiry time or a term and a heartbeat; renew through the commands route pushes the expiry back', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const HOUR = 3_600_000;
  const expiring = await env.as.user.post('/v1/leases?wait=60', { blueprint: name, expiresInMs: HOUR, heartbeatMs: 60_000 });
  expect(expiring.status, JSON.stringify(expiring.body)).toBe(200);
  expect(expiring.body.lease).toMatchObject({ state: 'active', termMs: HOUR, heartbeatMs: 60_000 });
  const firstExpiry = Date.parse(expiring.body.lease.expiresAt);
  expect(firstExpiry).toBeGreaterThan(Date.now() + HOUR / 2);
  expect(expiring.body.lease.heartbeatDeadline).not.toBeNull();

  const at = new Date(Date.now() + 2 * HOUR);
  const absolute = await env.as.user.post('/v1/leases', { blueprint: name, expiresAt: at.toISOString() });
  expect(absolute.status).toBe(202);
  expect(Date.parse(absolute.body.lease.expiresAt)).toBe(at.getTime());
  expect(absolute.body.lease.heartbeatMs).toBeNull();

  // The holder renews its own lease: a `renew` command like any other, 202 or (waiting) 200 once applied.
  const renewed = await env.as.user.post(`/v1/leases/${expiring.body.lease.id}/commands?wait=60`, {
    kind: 'renew',
    reason: 'still building',
    payload: { expiresInMs: 4 * HOUR },
  });
  expect(renewed.status, JSON.stringify(renewed.body)).toBe(200);
  expect(renewed.body.command).toMatchObject({ kind: 'renew', status: 'done', issuedBy: 'token:user', source: 'api', reason: 'still building' });
  const shown = await env.as.viewer.get(`/v1/leases/${expiring.body.lease.id}`);
  expect(shown.body.lease).toMatchObject({ state: 'active', termMs: 4 * HOUR });
  expect(Date.parse(shown.body.lease.expiresAt)).toBeGreaterThan(firstExpiry + 2 * HOUR);

  // A lease that is gone cannot be renewed: 409, before anything is queued.
  await env.as.user.post(`/v1/leases/${expiring.body.lease.id}/commands?wait=60`, { kind: 'release' });
  const late = await env.as.user.post(`/v1/leases/${expiring.body.lease.id}/commands`, { kind: 'renew' });
  expect(late.status, JSON.stringify(late.body)).toBe(409);
  expect(late.body.code).toBe('conflict');
});

test('an unknown target is 404; a release the state forbids is 409, naming the command that did it', async () => {
  expect((await env.as.operator.post('/v1/leases/999999/commands', { kind: 'release' })).status).toBe(404);
  expect((await env.as.operator.post('/v1/resources/999999/commands', { kind: 'reclaim' })).status).toBe(404);
  const { name } = await simulatedBlueprint(env.as.admin);
  const lease = await activeLease(env.as.operator, name);
  const release = await env.as.operator.post(`/v1/leases/${lease.id}/commands?wait=60`, { kind: 'release' });
  const again = await env.as.operator.post(`/v1/leases/${lease.id}/commands`, { kind: 'release' });
  expect(again.status).toBe(409);
  expect(again.body.code).toBe('conflict');
  expect(again.body.message).toMatch(/is destroyed; release is accepted only when it is/);
  expect(again.body.details.settledBy).toBe(release.body.command.id);
});

test('GET answers are the read models the CLI prints with --json', async () => {
  const { id, name } = await simulatedBlueprint(env.as.admin);
  const lease = await activeLease(env.as.user, name);
  // A second command of the lease's own (its first, the grant, came from its resource), to page over.
  expect((await env.as.user.post(`/v1/leases/${lease.id}/commands?wait=60`, { kind: 'renew', payload: { expiresInMs: 3_600_000 } })).status).toBe(
    200,
  );
  const shown = await env.as.viewer.get(`/v1/leases/${lease.id}`);
  expect(Object.keys(shown.body)).toEqual(['lease', 'line', 'queue', 'timeline']);
  expect(shown.body.timeline.entries.length).toBeGreaterThan(0);
  const blueprint = await env.as.viewer.get(`/v1/blueprints/${name}`);
  expect(blueprint.body.blueprint).toMatchObject({ id, name, leasesByState: { active: 1 } });
  const resources = await env.as.viewer.get(`/v1/resources?blueprint=${name}`);
  expect(resources.body.items).toHaveLength(1);
  const resource = await env.as.viewer.get(`/v1/resources/${resources.body.items[0].id}`);
  expect(resource.body.resource.slots).toHaveLength(1);
  const page = await env.as.viewer.get(`/v1/leases?blueprint=${name}&holder=token:user&state=active&limit=1`);
  expect(page.body).toEqual({ items: [expect.objectContaining({ id: lease.id })], next: null });
  const commands = await env.as.viewer.get(`/v1/commands?target=lease:${lease.id}&limit=1`);
  expect(commands.body.items).toHaveLength(1);
  expect(commands.body.next).toBe(commands.body.items[0].id);
  // Oldest first unless asked; live means not destroyed.
  const kinds = async (order: string) =>
    (await env.as.viewer.get(`/v1/commands?target=lease:${lease.id}${order}`)).body.items.map((c: { kind: string }) => c.kind);
  expect(await kinds('')).toEqual(['grant', 'renew']);
  expect(await kinds('&order=newest')).toEqual(['renew', 'grant']);
  const live = await env.as.viewer.get(`/v1/leases?blueprint=${name}&state=live`);
  expect(live.body.items.map((l: { id: number }) => l.id)).toEqual([lease.id]);
  const badOrder = await env.as.viewer.get(`/v1/leases?order=sideways`);
  expect(badOrder.status).toBe(400);
  expect(badOrder.body.message).toMatch(/order/);
});

test('cancel: a queued command is cancelled and never applied; a running one is refused', async () => {
  const { name } = await simulatedBlueprint(env.as.admin, { operationLatencyMs: { releaseLease: 4000 } });
  const queuedLease = await activeLease(env.as.user, name);
  const runningLease = await activeLease(env.as.user, name);

  const running = await env.as.user.post(`/v1/leases/${runningLease.id}/commands`, { kind: 'release' });
  await waitForStatus(running.body.command.id, 'running');
  const refused = await env.as.user.post(`/v1/commands/${running.body.command.id}/cancel`);
  expect(refused.status).toBe(409);
  expect(refused.body.details).toMatchObject({ status: 'running' });

  await env.stopWorker();
  try {
    const queued = await env.as.user.post(`/v1/leases/${queuedLease.id}/commands`, { kind: 'release' });
    expect(queued.body.command.status).toBe('queued');
    const cancelled = await env.as.user.post(`/v1/commands/${queued.body.command.id}/cancel`, { reason: 'changed my mind' });
    expect(cancelled.status).toBe(200);
    expect(cancelled.body.command).toMatchObject({ status: 'cancelled', message: 'cancelled by token:user: changed my mind' });
    const twice = await env.as.user.post(`/v1/commands/${queued.body.command.id}/cancel`);
    expect(twice.status).toBe(409);
  } finally {
    await env.startWorker();
  }
  // The worker is back: the cancelled release never runs, the lease stays active.
  await waitForStatus(running.body.command.id, 'done');
  const lease = await env.as.viewer.get(`/v1/leases/${queuedLease.id}`);
  expect(lease.body.lease.state).toBe('active');
  const effects = await env.database.db
    .selectFrom('simulated_effects')
    .select('object_id')
    .where('operation', '=', 'releaseLease')
    .where('object_id', '=', queuedLease.id)
    .execute();
  expect(effects).toEqual([]);
});

async function waitForStatus(commandId: number, status: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const shown = await env.as.viewer.get(`/v1/commands/${commandId}`);
    if (shown.body.command.status === status) return;
    if (Date.now() > deadline) throw new Error(`command ${commandId} never became ${status}: ${shown.body.command.status}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

test("many waiting requests share the server's one LISTEN connection", async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const leases = await Promise.all(Array.from({ length: 5 }, () => activeLease(env.as.operator, name)));
  await env.stopWorker();
  try {
    const waits = leases.map((lease) => env.as.operator.post(`/v1/leases/${lease.id}/commands?wait=4`, { kind: 'release' }));
    await waitFor('every request to be waiting', async () => {
      const queued = await env.database.db.selectFrom('commands').select('id').where('kind', '=', 'release').where('status', '=', 'queued').execute();
      return queued.length >= leases.length;
    });
    const { rows } = await sql<{ n: number }>`
      select count(*)::int as n from pg_stat_activity where datname = current_database() and query ilike 'listen %'
    `.execute(env.database.db);
    expect(rows[0]!.n).toBe(1);
    for (const answer of await Promise.all(waits)) expect(answer.body.outcome).toBe('timed_out');
  } finally {
    await env.startWorker();
  }
});
