import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createToken } from '../../src/api/auth/tokens.ts';
import { ApiServer } from '../../src/server/ApiServer.ts';
import { loadConfig } from '../../src/config.ts';
import { Database } from '../../src/db/Database.ts';
import { EmbeddedDatabase } from '../../src/db/EmbeddedDatabase.ts';
import { migrate } from '../../src/db/migrate.ts';
import { ApiClient } from '../api/support/ApiClient.ts';
import { simulatedBlueprint } from '../api/support/fixtures.ts';
import { CallbackReceiver } from '../callbacks/support/CallbackReceiver.ts';
import { takeTurn, TURN_TIMEOUT_MS } from '../concurrency/support/oneAtATime.ts';
import { WorkerProcesses } from '../concurrency/support/WorkerProcesses.ts';
import { testLog } from '../helpers/testDatabase.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { LeaseStorm } from './support/LeaseStorm.ts';
import { expectStormCameThrough } from './support/stormOutcome.ts';

/**
 * PostgreSQL restarts (stopped and started again on the same data directory
 * and port) twice while API clients create and release leases through the
 * API (half of them waiting, `?wait`) and two worker processes drain them.
 * Checked: the API answers 503 with Retry-After during the outage and never
 * 500; every acknowledged command settles and none is doubled; every worker beats (so its runner runs) again
 * within 5 s of the database answering; a `?wait` is answered by a LISTEN
 * notice after the restart (the API's re-read is set to two minutes, so
 * nothing else could answer it in time); and the collector's crontab and a
 * callback delivery work after the restarts.
 */
const HOME = path.resolve('.slipway', `restart-${randomBytes(4).toString('hex')}`);
const RESTARTS = 2;
const CLIENTS = 6;
/** The bound for every worker to work again once the database answers. */
const BACK_WITHIN_MS = 5000;

const state = {} as {
  embedded: EmbeddedDatabase;
  database: Database;
  server: ApiServer;
  workers: WorkerProcesses;
  receiver: CallbackReceiver;
  admin: ApiClient;
  endTurn: () => Promise<void>;
};

beforeAll(async () => {
  // Two workers flat out and a server restart: take turns with the concurrency files.
  state.endTurn = await takeTurn();
  state.embedded = await EmbeddedDatabase.open(HOME, testLog);
  // Keeps its connections, as the service's API server does (Database.open): they all die in the restarts.
  state.database = Database.fromUrl(state.embedded.url, testLog, { poolSize: 20, keepConnections: true });
  await migrate(state.database, testLog);
  state.workers = new WorkerProcesses(state.embedded.url, { SLIPWAY_HEARTBEAT_MS: '500', SLIPWAY_GC_INTERVAL_MINUTES: '1' });
  await state.workers.start(2);
  const config = loadConfig({
    DATABASE_URL: state.embedded.url,
    LOG_LEVEL: 'warn',
    SLIPWAY_API_PORT: '0',
    SLIPWAY_API_AUTH_FAILURES_PER_MINUTE: '100000',
    SLIPWAY_API_WAIT_REREAD_MS: '120000',
  });
  state.server = await ApiServer.start(state.database, config, testLog);
  const { secret } = await createToken(state.database.db, { name: 'restart-admin', role: 'admin' }, 'test');
  state.admin = new ApiClient(state.server.url, secret);
  state.receiver = await CallbackReceiver.start();
}, TURN_TIMEOUT_MS);

afterAll(async () => {
  try {
    await state.server?.stop();
    await state.workers?.stopAll();
    await state.database?.close();
    await state.embedded?.stop();
    await state.receiver?.close();
    await rm(HOME, { recursive: true, force: true });
  } finally {
    await state.endTurn?.();
  }
});

/** When each running worker last beat, by pid (the registry's id names the pid). */
async function heartbeats(database: Database): Promise<Map<number, Date>> {
  const rows = await database.db.selectFrom('workers').select(['pid', 'heartbeat_at']).execute();
  return new Map(rows.map((row) => [row.pid, row.heartbeat_at]));
}

test('a PostgreSQL restart, twice, during a storm of API appends and drains by two worker processes', async () => {
  const { admin, database, workers } = state;
  const busy = await simulatedBlueprint(admin, {}, { maxResources: 8, leasesPerResource: 8 });
  const slow = await simulatedBlueprint(admin, { operationLatencyMs: { releaseLease: 300 } }, { maxResources: 2, leasesPerResource: 4 });
  const storm = new LeaseStorm([admin], busy.name);
  storm.start(CLIENTS);
  const port = Number(new URL(state.embedded.url).port);
  const recoveries: number[] = [];
  let lastUp = new Date();

  for (let restart = 1; restart <= RESTARTS; restart++) {
    await waitFor('the storm to get going', async () => storm.releases >= 20 * restart);
    const answered = storm.answers.length;
    await state.embedded.stop();
    await waitFor('the outage to reach the API', async () => storm.answers.slice(answered).some((a) => a.status >= 500), 30_000);
    await sleep(1000);

    state.embedded = await EmbeddedDatabase.open(HOME, testLog, 'slipway', { port });
    const answering = Date.now();
    lastUp = await waitFor('the database clock', async () => (await sql<{ now: Date }>`select now()`.execute(database.db)).rows[0]!.now);
    const pids = workers.running().map((w) => w.child.pid!);
    expect(pids, `no worker may die of the restart:\n${workers.exitedOutput()}`).toHaveLength(2);
    // A worker beats only while its graphile-worker runner runs (WorkerRegistry).
    await waitFor(
      `both workers to beat again within ${BACK_WITHIN_MS} ms of the database answering`,
      async () => {
        const beats = await heartbeats(database);
        return pids.every((pid) => (beats.get(pid)?.getTime() ?? 0) > lastUp.getTime());
      },
      BACK_WITHIN_MS,
    );
    recoveries.push(Date.now() - answering);

    // The API's LISTEN connection is back (readyz says so), and a wait is
    // answered by notices: its re-read is two minutes away.
    await waitFor('the API to be ready', async () => (await admin.get('/readyz')).status === 200, 30_000);
    const lease = await admin.post('/v1/leases?wait=30', { blueprint: slow.name });
    expect(lease.status, JSON.stringify(lease.body)).toBe(200);
    expect(lease.body.lease.state).toBe('active');
    const release = await admin.post(`/v1/leases/${lease.body.lease.id}/commands?wait=30`, { kind: 'release' });
    expect(release.status, JSON.stringify(release.body)).toBe(200);
    expect(release.body.outcome).toBe('settled');
  }
  console.log(`recovery after each restart (database answering → both workers beating again): ${recoveries.join(', ')} ms`);
  await storm.stop();

  await expectStormCameThrough(database.db, storm, busy.id, 120_000);

  // A callback delivery and a scheduled collector pass, after the last restart.
  const lease = await admin.post('/v1/leases?wait=30', { blueprint: slow.name });
  expect(lease.status, JSON.stringify(lease.body)).toBe(200);
  const withCallback = await admin.post(`/v1/leases/${lease.body.lease.id}/commands`, {
    kind: 'release',
    callback: { url: state.receiver.url('/after-restart') },
  });
  expect(withCallback.status, JSON.stringify(withCallback.body)).toBe(202);
  await waitFor('the callback to be delivered', async () => state.receiver.received('/after-restart').length > 0, 60_000);
  // The crontab runs the collector every minute, on the minute.
  await waitFor(
    'a scheduled collector pass after the restart',
    async () => {
      const passes = await database.db
        .selectFrom('gc_passes')
        .select('id')
        .where('trigger', '=', 'schedule')
        .where('started_at', '>', lastUp)
        .execute();
      return passes.length > 0;
    },
    150_000,
  );
});
