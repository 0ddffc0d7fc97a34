import { sql } from 'kysely';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { verifyCallbackSignature } from '../../src/callbacks/signCallback.ts';
import { callbackOf } from '../../src/api/shapes.ts';
import { readCallbacks } from '../../src/read/callbacks.ts';
import { CallbackReceiver, type ReceivedCallback } from '../callbacks/support/CallbackReceiver.ts';
import { TEST_SECRET } from '../callbacks/support/callbackFixtures.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { ApiClient } from './support/ApiClient.ts';
import { apiTestEnv } from './support/apiTestEnv.ts';
import { activeLease, simulatedBlueprint } from './support/fixtures.ts';
import { runCollectorPass } from '../../src/gc/runCollector.ts';
import { TEST_GC } from '../gc/support/handDrain.ts';
import { testLog } from '../helpers/testDatabase.ts';

/**
 * Callbacks through the API: a real server, a real worker (graphile-worker in
 * this process) and a real HTTP receiver on a free loopback port.
 */
const env = apiTestEnv({
  worker: true,
  env: { SLIPWAY_CALLBACK_SECRET: TEST_SECRET, SLIPWAY_CALLBACK_BACKOFF_MS: '300', SLIPWAY_CALLBACK_MAX_ATTEMPTS: '3' },
});

let receiver: CallbackReceiver;
let blueprint: string;

beforeAll(async () => {
  receiver = await CallbackReceiver.start();
  blueprint = (await simulatedBlueprint(env.as.admin, {}, { maxResources: 20, leasesPerResource: 1 })).name;
});
afterAll(async () => {
  await receiver?.close();
});

function verified(request: ReceivedCallback): boolean {
  return verifyCallbackSignature({ header: request.headers['slipway-signature'] as string, body: request.body, secret: TEST_SECRET }).ok;
}

/** GET /v1/commands/{id} once its (only) callback has reached `status`. */
function commandOnceCallback(commandId: number, status: string) {
  return waitFor(`command ${commandId}'s callback to be ${status}`, async () => {
    const shown = await env.as.viewer.get(`/v1/commands/${commandId}`);
    return shown.body.callbacks?.[0]?.status === status ? shown.body : undefined;
  });
}

async function rowCounts(): Promise<Record<string, number>> {
  const { rows } = await sql<Record<string, number>>`
    select (select count(*) from commands)::int as commands, (select count(*) from command_callbacks)::int as callbacks,
           (select count(*) from events)::int as events, (select count(*) from idempotency_keys)::int as keys
  `.execute(env.database.db);
  return rows[0]!;
}

const resourceOf = async (leaseId: number): Promise<number> => (await env.as.viewer.get(`/v1/leases/${leaseId}`)).body.lease.resourceId;

test('a release with a callback is delivered signed, retried after the receiver fails, and every attempt shows on GET /v1/commands/{id}', async () => {
  receiver.script('/flaky', [{ status: 500 }]);
  const lease = await activeLease(env.as.user, blueprint);
  const url = receiver.url('/flaky');
  const release = await env.as.user.post(`/v1/leases/${lease.id}/commands`, { kind: 'release', reason: 'done', callback: { url } });
  expect(release.status, JSON.stringify(release.body)).toBe(202);
  const commandId: number = release.body.command.id;

  const shown = await commandOnceCallback(commandId, 'delivered');
  expect(shown.callbacks).toMatchObject([
    {
      url,
      status: 'delivered',
      attempts: 2,
      attemptLog: [
        { attempt: 1, statusCode: 500 },
        { attempt: 2, statusCode: 204, error: null },
      ],
    },
  ]);
  // The same document `slipway command show --json` prints for the callbacks.
  expect(shown.callbacks).toEqual((await readCallbacks(env.database.db, commandId)).map(callbackOf));

  const requests = receiver.received('/flaky');
  expect(requests.map((r) => r.headers['slipway-attempt'])).toEqual(['1', '2']);
  expect(requests.map(verified)).toEqual([true, true]);
  const body = JSON.parse(requests[1]!.body);
  expect(body).toMatchObject({
    outcome: 'succeeded',
    command: { id: commandId, kind: 'release', status: 'done', issuedBy: 'token:user', source: 'api', reason: 'done' },
  });
  // One slot a resource: the release gave back its resource's last slot, which the resource then counted.
  expect(body.tree.map((node: { kind: string }) => node.kind)).toEqual(['release', 'count_slots']);
});

test('a resource command takes a callback too', async () => {
  const lease = await activeLease(env.as.operator, blueprint);
  const url = receiver.url('/resource');
  const release = await env.as.operator.post(`/v1/resources/${await resourceOf(lease.id)}/commands`, { kind: 'release', callback: { url } });
  expect(release.status, JSON.stringify(release.body)).toBe(202);
  await commandOnceCallback(release.body.command.id, 'delivered');
  const [request, ...more] = receiver.received('/resource');
  expect(more).toEqual([]);
  expect(verified(request!)).toBe(true);
  expect(JSON.parse(request!.body)).toMatchObject({ outcome: 'succeeded', command: { id: release.body.command.id, targetKind: 'resource' } });
});

test('a duplicate that joins the release in flight has its callback follow that release', async () => {
  const lease = await activeLease(env.as.user, blueprint);
  await env.stopWorker(); // so the first release stays queued while the second arrives
  try {
    const first = await env.as.user.post(`/v1/leases/${lease.id}/commands`, { kind: 'release' });
    expect(first.status).toBe(202);
    const url = receiver.url('/joined');
    const second = await env.as.user.post(`/v1/leases/${lease.id}/commands`, { kind: 'release', callback: { url } });
    expect(second.status, JSON.stringify(second.body)).toBe(200);
    expect(second.body).toMatchObject({ coalesced: true, command: { id: first.body.command.id } });
    const waiting = await env.as.viewer.get(`/v1/commands/${first.body.command.id}`);
    expect(waiting.body.callbacks).toMatchObject([{ url, status: 'waiting', attempts: 0 }]);
  } finally {
    await env.startWorker();
  }
  const [request, ...more] = await waitFor('the joined callback', async () => {
    const received = receiver.received('/joined');
    return received.length > 0 ? received : undefined;
  });
  expect(more).toEqual([]);
  expect(JSON.parse(request!.body)).toMatchObject({ outcome: 'succeeded', command: { kind: 'release', targetId: lease.id, status: 'done' } });
});

test('a callback to a host not on the allow-list is a 400 naming the field, and nothing is written, key included', async () => {
  const lease = await activeLease(env.as.operator, blueprint);
  const resourceId = await resourceOf(lease.id);
  const key = { headers: { 'idempotency-key': `refused-${lease.id}` } };
  const before = await rowCounts();
  for (const path of [`/v1/leases/${lease.id}/commands`, `/v1/resources/${resourceId}/commands`]) {
    for (const url of [
      'http://169.254.169.254/latest/meta-data',
      'http://internal.example.com/hook',
      'file:///etc/passwd',
      `http://user:pw@${new URL(receiver.url('/')).host}/`,
    ]) {
      const refused = await env.as.operator.post(path, { kind: 'release', callback: { url } }, key);
      const said = `${path} ${url}: ${JSON.stringify(refused.body)}`;
      expect(refused.status, said).toBe(400);
      expect(refused.body.code, said).toBe('invalid_input');
      expect(refused.body.details.field, said).toBe('body.callback.url');
      expect(refused.body.message, said).toMatch(
        /^callback\.url: .*expected http\(s\):\/\/<host>\[:port\]\/<path> with a host allowed by SLIPWAY_CALLBACK_ALLOWED_HOSTS \(localhost, 127\.0\.0\.1, ::1\)$/,
      );
    }
  }
  expect(await rowCounts()).toEqual(before);
  expect(receiver.received('/refused')).toEqual([]);

  // A server with callbacks disabled (an empty list) refuses every URL, saying so.
  const closed = await env.startServer({ SLIPWAY_CALLBACK_ALLOWED_HOSTS: '' });
  const refusedThere = await new ApiClient(closed.url, env.as.operator.token).post(`/v1/leases/${lease.id}/commands`, {
    kind: 'release',
    callback: { url: receiver.url('/refused') },
  });
  expect(refusedThere.status).toBe(400);
  expect(refusedThere.body.message).toMatch(/none: callbacks are disabled/);
  expect(await rowCounts()).toEqual(before);

  // The key was left free: the corrected request takes effect with it.
  const accepted = await env.as.operator.post(
    `/v1/leases/${lease.id}/commands`,
    { kind: 'release', callback: { url: receiver.url('/corrected') } },
    key,
  );
  expect(accepted.status, JSON.stringify(accepted.body)).toBe(202);
  await commandOnceCallback(accepted.body.command.id, 'delivered');
});

test('the roles table applies to a request with a callback: refused with 403 and nothing written', async () => {
  const operatorsLease = await activeLease(env.as.operator, blueprint);
  const usersLease = await activeLease(env.as.user, blueprint);
  const url = receiver.url('/forbidden');
  const refusals: ReadonlyArray<[ApiClient, string]> = [
    [env.as.viewer, `/v1/leases/${usersLease.id}/commands`],
    [env.as.user, `/v1/leases/${operatorsLease.id}/commands`],
    [env.as.user, `/v1/resources/${await resourceOf(usersLease.id)}/commands`],
    [env.as.viewer, `/v1/resources/${await resourceOf(operatorsLease.id)}/commands`],
  ];
  const before = await rowCounts();
  for (const [client, path] of refusals) {
    const answer = await client.post(path, { kind: 'release', callback: { url } });
    expect(answer.status, `${path}: ${JSON.stringify(answer.body)}`).toBe(403);
    expect(answer.body.code).toBe('forbidden');
  }
  expect(await rowCounts()).toEqual(before);
  expect(receiver.received('/forbidden')).toEqual([]);
});

test("a lease's holder callback is told when a check finds its resource gone; a callback to a host not allowed is refused at creation", async () => {
  const refused = await env.as.user.post('/v1/leases', { blueprint, callback: { url: 'http://example.com/hook' } });
  expect(refused.status).toBe(400);
  expect(refused.body.message).toMatch(/callback/);

  const { id: bpId, name } = await simulatedBlueprint(env.as.admin, {}, { maxResources: 2, leasesPerResource: 1 });
  const created = await env.as.user.post('/v1/leases?wait=60', { blueprint: name, callback: { url: receiver.url('/holder') } });
  expect(created.status, JSON.stringify(created.body)).toBe(200);
  const leaseId = created.body.lease.id;
  const resourceId = await resourceOf(leaseId);

  // The driver now finds that resource gone; an operator asks for a check.
  const settings = await env.as.admin.post(`/v1/blueprints/${bpId}/commands?wait=30`, {
    kind: 'update_settings',
    payload: { settings: { checks: { gone: [resourceId] } } },
  });
  expect(settings.status, JSON.stringify(settings.body)).toBe(200);
  const check = await env.as.operator.post(`/v1/resources/${resourceId}/commands?wait=30`, { kind: 'check' });
  expect(check.status, JSON.stringify(check.body)).toBe(200);

  const [delivered] = await waitFor('the holder callback', async () =>
    receiver.received('/holder').length > 0 ? receiver.received('/holder') : undefined,
  );
  expect(verified(delivered!)).toBe(true);
  const body = JSON.parse(delivered!.body);
  expect(body).toMatchObject({
    event: 'command.settled',
    outcome: 'succeeded',
    command: { kind: 'resource_gone', targetKind: 'lease', targetId: leaseId, status: 'done', issuedBy: 'system:resource' },
  });
  // The destroy gave its slot back itself; the broken resource, being destroyed, is not asked to count.
  expect(body.tree.map((c: { kind: string }) => c.kind)).toEqual(['resource_gone', 'destroy']);
  expect(body.command.message).toBe(`resource ${resourceId} is gone: simulated: resource ${resourceId} is gone`);
  expect((await env.as.viewer.get(`/v1/leases/${leaseId}`)).body.lease).toMatchObject({ state: 'destroyed' });
});

test("a lease's holder callback is told when the collector releases it for its wait deadline or its expiry", async () => {
  const expiring = await env.as.user.post('/v1/leases?wait=60', { blueprint, expiresInMs: 1000, callback: { url: receiver.url('/expired') } });
  expect(expiring.status, JSON.stringify(expiring.body)).toBe(200);
  // A pool of its own, held, so the expiry's freed slot cannot reach the waiting lease.
  const { name } = await simulatedBlueprint(env.as.admin, {}, { maxResources: 1, leasesPerResource: 1 });
  const holder = await env.as.user.post('/v1/leases?wait=60', { blueprint: name });
  expect(holder.status, JSON.stringify(holder.body)).toBe(200);
  const waiting = await env.as.user.post('/v1/leases', { blueprint: name, waitTimeoutMs: 1000, callback: { url: receiver.url('/deadline') } });
  expect(waiting.status, JSON.stringify(waiting.body)).toBe(202);
  // Both deadlines pass; a collector pass ends both leases (this one, or the worker's scheduled one if it comes first).
  await new Promise((resolve) => setTimeout(resolve, 1200));
  await runCollectorPass(env.database, TEST_GC, 'cli', testLog);

  const told = async (path: string) => {
    const [delivered] = await waitFor(`the holder callback at ${path}`, async () =>
      receiver.received(path).length > 0 ? receiver.received(path) : undefined,
    );
    expect(verified(delivered!)).toBe(true);
    return JSON.parse(delivered!.body);
  };
  const deadline = await told('/deadline');
  expect(deadline).toMatchObject({
    event: 'command.settled',
    outcome: 'succeeded',
    command: { kind: 'release', targetKind: 'lease', targetId: waiting.body.lease.id, status: 'done', issuedBy: 'system:deadline' },
  });
  expect(deadline.command.reason).toMatch(/^deadline: not active by its wait deadline/);
  const expired = await told('/expired');
  expect(expired.command).toMatchObject({
    kind: 'release',
    targetId: expiring.body.lease.id,
    issuedBy: 'system:gc',
    message: 'released and destroyed',
  });
  expect(expired.command.reason).toMatch(/^expired: its expiry time/);
  expect((await env.as.user.post(`/v1/leases/${holder.body.lease.id}/commands?wait=30`, { kind: 'release' })).status).toBe(200);
});

test("a lease's holder callback is told ahead of its blueprint's longest hold (with the ending), and again when the lease ends at it", async () => {
  const name = `held-${Date.now()}`;
  const made = await env.as.admin.post('/v1/blueprints', { name, driver: 'simulated', maxResources: 1, leasesPerResource: 1, maxHoldMs: 3000 });
  expect(made.status, JSON.stringify(made.body)).toBe(201);
  const created = await env.as.user.post('/v1/leases?wait=60', { blueprint: name, callback: { url: receiver.url('/limited') } });
  expect(created.status, JSON.stringify(created.body)).toBe(200);
  const { id, endBy } = created.body.lease;
  const reason = `reached blueprint ${name}'s longest hold of 3s`;

  const [notice, end] = await waitFor('both holder callbacks', async () =>
    receiver.received('/limited').length >= 2 ? receiver.received('/limited').map((r) => JSON.parse(r.body)) : undefined,
  );
  expect(notice).toMatchObject({
    outcome: 'succeeded',
    command: {
      kind: 'notify_ending',
      targetKind: 'lease',
      targetId: id,
      issuedBy: 'system:deadline',
      message: `ending by ${endBy.replace('T', ' ')}: ${reason}`,
    },
    ending: { kind: 'time_limit', at: endBy, reason },
  });
  expect(end).toMatchObject({ command: { kind: 'release', targetId: id, issuedBy: 'system:deadline', reason, message: 'released and destroyed' } });
  expect(end.ending).toBeUndefined();
});
