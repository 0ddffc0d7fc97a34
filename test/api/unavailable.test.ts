import pg from 'pg';
import { expect, test } from 'vitest';
import { Database } from '../../src/db/Database.ts';
import { terminateBackend, urlWithoutServer } from '../helpers/deadEnds.ts';
import { testLog } from '../helpers/testDatabase.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { apiTestEnv } from './support/apiTestEnv.ts';
import { ApiClient } from './support/ApiClient.ts';
import { activeLease, simulatedBlueprint } from './support/fixtures.ts';
import { inProcessApp } from './support/inProcessApp.ts';

/**
 * A database outage as the API's callers see it: a 503 `unavailable` with
 * Retry-After, never a 500; and when the connection failed while the
 * request's writes were committing, an answer that says they may have.
 */
const env = apiTestEnv({ worker: true });

/** The API and web UI of a process whose database is down: its pool points where nothing listens. */
async function appWithoutDatabase() {
  const database = Database.fromUrl(await urlWithoutServer(env.database.url), testLog);
  const { app, close } = await inProcessApp(database, testLog, env.database);
  return {
    app,
    async close() {
      await close();
      await database.close();
    },
  };
}

test('with the database down, API requests and web pages answer 503 with Retry-After, saying nothing was written', async () => {
  const down = await appWithoutDatabase();
  try {
    const authorization = `Bearer ${env.as.admin.token}`;
    for (const [method, url, payload] of [
      ['GET', '/v1/leases', undefined],
      ['POST', '/v1/leases', { blueprint: 'anything' }],
      ['POST', '/v1/leases/1/commands', { kind: 'release' }],
    ] as const) {
      const answer = await down.app.inject({ method, url, headers: { authorization }, payload });
      const said = `${method} ${url}: ${answer.statusCode} ${answer.body}`;
      expect(answer.statusCode, said).toBe(503);
      expect(answer.headers['retry-after'], said).toMatch(/^\d+$/);
      expect(answer.json(), said).toMatchObject({ code: 'unavailable', details: { mayHaveCommitted: false } });
      expect(answer.json().message, said).toMatch(/nothing was written/);
    }
    const page = await down.app.inject({ method: 'GET', url: '/leases', headers: { cookie: 'slipway_session=some-session' } });
    expect(page.statusCode, page.body).toBe(503);
    expect(page.headers['retry-after']).toMatch(/^\d+$/);
    expect(page.headers['content-type']).toMatch(/text\/html/);
    expect(page.body).toMatch(/unavailable/);
  } finally {
    await down.close();
  }
});

/**
 * Holds lease `id`'s row locked, so a command appended to it waits; runs
 * `request`, terminates the backend of the append waiting for the row, and
 * returns the answer (the lock is let go after).
 */
async function terminatedWhileWaiting<T>(id: number, request: () => Promise<T>): Promise<T> {
  const locker = new pg.Client({ connectionString: env.database.url });
  await locker.connect();
  try {
    await locker.query('begin');
    await locker.query('select 1 from leases where id = $1 for update', [id]);
    const answer = request();
    const pid = await waitFor('the append to wait for the locked lease row', async () => {
      const { rows } = await locker.query<{ pid: number }>(
        `select pid from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and pid <> pg_backend_pid()`,
      );
      return rows[0]?.pid;
    });
    await terminateBackend(env.database.url, pid);
    return await answer;
  } finally {
    await locker.query('rollback');
    await locker.end();
  }
}

async function releaseCount(lease: number): Promise<number> {
  const rows = await env.database.db
    .selectFrom('commands')
    .select('id')
    .where('target_kind', '=', 'lease')
    .where('target_id', '=', lease)
    .where('kind', '=', 'release')
    .execute();
  return rows.length;
}

test('an append whose connection is terminated after it was sent: 503, and the answer says it may have committed', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const lease = await activeLease(env.as.admin, name);
  const answer = await terminatedWhileWaiting(lease.id, () => env.as.admin.post(`/v1/leases/${lease.id}/commands`, { kind: 'release' }));
  expect(answer.status, JSON.stringify(answer.body)).toBe(503);
  expect(answer.headers.get('retry-after')).toMatch(/^\d+$/);
  expect(answer.body).toMatchObject({ code: 'unavailable', details: { mayHaveCommitted: true } });
  expect(answer.body.message).toMatch(/may or may not have taken effect.*Idempotency-Key/);
  // It had not in fact committed (the backend died waiting for the row); the API could not know that.
  expect(await releaseCount(lease.id)).toBe(0);
});

test('a request with an Idempotency-Key whose connection is terminated before its commit: 503, nothing written, and the key is free to replay', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const lease = await activeLease(env.as.admin, name);
  const options = { headers: { 'idempotency-key': `release-${lease.id}` } };
  const release = () => env.as.admin.post(`/v1/leases/${lease.id}/commands`, { kind: 'release' }, options);
  const answer = await terminatedWhileWaiting(lease.id, release);
  expect(answer.status, JSON.stringify(answer.body)).toBe(503);
  expect(answer.headers.get('retry-after')).toMatch(/^\d+$/);
  expect(answer.body).toMatchObject({ code: 'unavailable', details: { mayHaveCommitted: false } });
  expect(await releaseCount(lease.id)).toBe(0);

  const replayed = await release();
  expect(replayed.status, JSON.stringify(replayed.body)).toBe(202);
  expect(await releaseCount(lease.id)).toBe(1);
});

test('a ?wait request cut off after its commit answers 503 mayHaveCommitted, and its retry with the same key is answered at once with its 202', async () => {
  // No worker: the new lease is never served, so its request waits and re-reads (every 100 ms on this server).
  await env.stopWorker();
  const server = await env.startServer({ SLIPWAY_API_WAIT_REREAD_MS: '100' });
  const client = new ApiClient(server.url, env.as.admin.token);
  const locker = new pg.Client({ connectionString: env.database.url });
  await locker.connect();
  try {
    const { name } = await simulatedBlueprint(env.as.admin);
    const headers = { 'idempotency-key': `cut-off-${name}` };
    const path = '/v1/leases?wait=30';
    const first = client.post(path, { blueprint: name }, { headers });
    await waitFor('the first request to commit its lease and key', async () =>
      env.database.db.selectFrom('idempotency_keys').select('state').where('key', '=', headers['idempotency-key']).executeTakeFirst(),
    );
    // The wait's next read blocks on the locked table; its connection is then cut, as in a failover.
    await locker.query('begin');
    await locker.query('lock table commands in access exclusive mode');
    const pid = await waitFor('the wait to read the tree behind the lock', async () => {
      const { rows } = await locker.query<{ pid: number }>(
        `select pid from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and pid <> pg_backend_pid()`,
      );
      return rows[0]?.pid;
    });
    await terminateBackend(env.database.url, pid);
    const cutOff = await first;
    await locker.query('rollback');
    expect(cutOff.status, JSON.stringify(cutOff.body)).toBe(503);
    expect(cutOff.body).toMatchObject({ code: 'unavailable', details: { mayHaveCommitted: true } });

    const retried = await client.post(path, { blueprint: name }, { headers });
    expect(retried.status, JSON.stringify(retried.body)).toBe(202);
    expect(retried.headers.get('idempotent-replayed')).toBe('true');
    expect(retried.body.lease.blueprintName).toBe(name);
    const leases = await env.database.db
      .selectFrom('leases')
      .innerJoin('blueprints', 'blueprints.id', 'leases.blueprint_id')
      .select('leases.id')
      .where('blueprints.name', '=', name)
      .execute();
    expect(leases.map((l) => l.id)).toEqual([retried.body.lease.id]);
  } finally {
    await locker.query('rollback').catch(() => undefined);
    await locker.end();
    await env.startWorker();
  }
});
