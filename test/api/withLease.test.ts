import { setTimeout as sleep } from 'node:timers/promises';
import { expect, test } from 'vitest';
import { ApiServer } from '../../src/server/ApiServer.ts';
import { loadConfig } from '../../src/config.ts';
import { type HoldEvent, LeaseLost, LeaseNotGranted, LeaseUnreachable, SlipwayClient } from '../../src/client/index.ts';
import { testLog } from '../helpers/testDatabase.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { apiTestEnv } from './support/apiTestEnv.ts';
import { simulatedBlueprint } from './support/fixtures.ts';
import { NO_SCHEDULED_COLLECTOR } from '../cli/rowCounts.ts';

/**
 * `client.withLease` against a real server and worker: the semantics
 * `slipway lease run` is built on (test/cli/leaseRun.test.ts runs them
 * through real processes). No collector runs: deadlines are the workers' timekeeper's.
 */
const env = apiTestEnv({ worker: true, env: NO_SCHEDULED_COLLECTOR });
const client = (baseUrl = env.server.url) => new SlipwayClient({ baseUrl, token: env.as.user.token! });

const leaseRow = (id: number) => env.database.db.selectFrom('leases').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
const released = (id: number) => waitFor(`lease ${id} to be released`, async () => ['released', 'destroyed'].includes((await leaseRow(id)).state));
const reasonsOf = async (id: number) =>
  await env.database.db
    .selectFrom('commands')
    .select(['kind', 'reason', 'issued_by'])
    .where('target_kind', '=', 'lease')
    .where('target_id', '=', id)
    .orderBy('id')
    .execute();

test('the work runs with the active lease and its resource; the lease is released when it returns, with the reason given', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const events: HoldEvent['type'][] = [];
  const result = await client().withLease(
    { blueprint: name },
    async ({ lease, resource }, signal) => {
      expect(lease).toMatchObject({ state: 'active', blueprintName: name, holder: 'token:user', resourceId: resource.id });
      expect(resource.blueprintName).toBe(name);
      expect(signal.aborted).toBe(false);
      return lease.id;
    },
    { onEvent: (event) => events.push(event.type), releaseReason: (outcome) => `done: ${'value' in outcome}` },
  );
  await released(result);
  expect(events).toEqual(['requested', 'active', 'released']);
  expect((await reasonsOf(result)).at(-1)).toMatchObject({ kind: 'release', reason: 'done: true', issued_by: 'token:user' });
  // A heartbeat lease by default, so that a holder that dies gives it back.
  expect((await leaseRow(result)).heartbeat_ms).toBe(30_000);
});

test('work that throws: the lease is released and the error is the answer', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  let id = 0;
  const failure = await client()
    .withLease({ blueprint: name }, async ({ lease }) => {
      id = lease.id;
      throw new Error('tests failed');
    })
    .catch((error: unknown) => error);
  expect((failure as Error).message).toBe('tests failed');
  await released(id);
  expect((await reasonsOf(id)).at(-1)).toMatchObject({ kind: 'release', reason: 'the work failed' });
});

test('a lease released from outside aborts the work signal with LeaseLost, saying who and why', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const failure = await client()
    .withLease({ blueprint: name }, async ({ lease }, signal) => {
      const answer = await env.as.operator.post(`/v1/leases/${lease.id}/commands`, { kind: 'release', reason: 'needed elsewhere' });
      expect(answer.status).toBeLessThan(300);
      await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
      return 'unreachable';
    })
    .catch((error: unknown) => error);
  expect(failure).toBeInstanceOf(LeaseLost);
  expect((failure as LeaseLost).message).toMatch(/^lease \d+ ended while held: released by token:operator \(api\): needed elsewhere/);
  // Nobody releases a lease that has ended: the operator's release is its last command.
  expect((await reasonsOf((failure as LeaseLost).lease.id)).at(-1)).toMatchObject({ kind: 'release', reason: 'needed elsewhere' });
});

test('stopping while the lease waits releases it and rejects with LeaseNotGranted (stopped); the work never runs', async () => {
  const { name } = await simulatedBlueprint(env.as.admin, {}, { maxResources: 1, leasesPerResource: 1 });
  const held = await env.as.admin.post('/v1/leases?wait=30', { blueprint: name });
  const stop = new AbortController();
  const events: HoldEvent[] = [];
  const waiting = client()
    .withLease({ blueprint: name }, async () => 'ran', { signal: stop.signal, onEvent: (event) => events.push(event) })
    .catch((error: unknown) => error);
  const line = await waitFor('the lease to say where it waits', async () => events.find((e) => e.type === 'waiting'));
  expect(line).toMatchObject({ line: { position: 1, reason: expect.stringContaining('no free slot') } });
  stop.abort('enough');
  const failure = await waiting;
  expect(failure).toBeInstanceOf(LeaseNotGranted);
  expect(failure).toMatchObject({ why: 'stopped' });
  const requested = events.find((e) => e.type === 'requested') as Extract<HoldEvent, { type: 'requested' }>;
  await released(requested.lease.id);
  await env.as.admin.post(`/v1/leases/${held.body.lease.id}/commands`, { kind: 'release' });
});

test('a request that is refused, and a lease not active by its wait deadline, reject with LeaseNotGranted saying which', async () => {
  const refused = await client()
    .withLease({ selector: 'nothing-has=this' }, async () => 'ran')
    .catch((error: unknown) => error);
  expect(refused).toMatchObject({ name: 'LeaseNotGranted', why: 'refused' });
  expect((refused as Error).message).toMatch(/can ever match selector/);

  const { name } = await simulatedBlueprint(env.as.admin, {}, { maxResources: 1, leasesPerResource: 1 });
  const held = await env.as.admin.post('/v1/leases?wait=30', { blueprint: name });
  const events: HoldEvent[] = [];
  const late = client()
    .withLease({ blueprint: name, waitTimeoutMs: 1000 }, async () => 'ran', { onEvent: (event) => events.push(event) })
    .catch((error: unknown) => error);
  // No collector runs here: the workers' timekeeper releases it once its wait deadline passes.
  const failure = await late;
  expect(failure).toMatchObject({ name: 'LeaseNotGranted', why: 'deadline' });
  await env.as.admin.post(`/v1/leases/${held.body.lease.id}/commands`, { kind: 'release' });
});

test('the heartbeat is beaten while the work runs, and an expiry the requester set stays where it was', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const id = await client().withLease({ blueprint: name, heartbeatMs: 2000, expiresInMs: 3_600_000 }, async ({ lease }) => {
    // Three intervals: without beats the workers' timekeeper would release it after two.
    await sleep(6000);
    const row = await leaseRow(lease.id);
    expect(row.state).toBe('active');
    expect(row.expires_at?.toISOString()).toBe(lease.expiresAt);
    return lease.id;
  });
  const renewals = (await reasonsOf(id)).filter((c) => c.kind === 'renew');
  expect(renewals.length).toBeGreaterThanOrEqual(2);
  expect(renewals.every((c) => c.reason === 'heartbeat')).toBe(true);
});

test('the API restarting while the work runs: it runs on, and the lease is released after it', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const config = (port: string) => loadConfig({ DATABASE_URL: env.database.url, LOG_LEVEL: 'warn', SLIPWAY_API_PORT: port });
  let server = await ApiServer.start(env.database, config('0'), testLog);
  const port = new URL(server.url).port;
  const events: HoldEvent['type'][] = [];
  const id = await client(server.url).withLease(
    { blueprint: name, heartbeatMs: 2000 },
    async ({ lease }, signal) => {
      await server.stop();
      // Longer than a watch's read and a beat's interval, within the heartbeat deadline (two intervals).
      await sleep(2500);
      server = await ApiServer.start(env.database, config(port), testLog);
      await waitFor('the holder to reach the API again', async () => events.includes('reconnected'));
      expect(signal.aborted).toBe(false);
      return lease.id;
    },
    { onEvent: (event) => events.push(event.type) },
  );
  await server.stop();
  expect(events).toContain('retrying');
  await released(id);
});

test('Slipway out of reach for longer than the heartbeat deadline allows: the work is aborted with LeaseUnreachable', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const server = await ApiServer.start(
    env.database,
    loadConfig({ DATABASE_URL: env.database.url, LOG_LEVEL: 'warn', SLIPWAY_API_PORT: '0' }),
    testLog,
  );
  const failure = await client(server.url)
    .withLease({ blueprint: name, heartbeatMs: 1000 }, async (_held, signal) => {
      await server.stop();
      await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
      return 'aborted';
    })
    .catch((error: unknown) => error);
  expect(failure).toBeInstanceOf(LeaseUnreachable);
  expect((failure as Error).message).toMatch(/^Slipway could not be reached while lease \d+ was held/);
});
