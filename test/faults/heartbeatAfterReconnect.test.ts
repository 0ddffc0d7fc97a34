import { afterAll, beforeAll, expect, test } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { SlipwayWorker } from '../../src/worker/SlipwayWorker.ts';
import { WORKER_LOCK_CLASS } from '../../src/worker/WorkerRegistry.ts';
import { terminateBackend } from '../helpers/deadEnds.ts';
import { createTestDatabase, testLog } from '../helpers/testDatabase.ts';
import { waitFor } from '../helpers/waitFor.ts';

/**
 * A worker whose registry connection is cut (a restart, a failover) beats
 * again as soon as it can connect, not at its next heartbeat: here the
 * heartbeat interval is ten minutes, so only the reconnection can beat
 * within the test.
 */
let database: Awaited<ReturnType<typeof createTestDatabase>>;
let worker: SlipwayWorker;

beforeAll(async () => {
  database = await createTestDatabase({ poolSize: 10 });
  worker = await SlipwayWorker.start(database, loadConfig({ DATABASE_URL: database.url, SLIPWAY_HEARTBEAT_MS: '600000' }), testLog);
});
afterAll(async () => {
  await worker?.stop();
  await database?.drop();
});

/** The backend holding the worker's liveness lock (WorkerRegistry), if any. */
async function livenessHolder(): Promise<number | undefined> {
  const { rows } = await database.pool.query<{ pid: number }>(
    `select pid from pg_locks where locktype = 'advisory' and granted and classid = $1::bigint::oid and objsubid = 2
       and database = (select oid from pg_database where datname = current_database())`,
    [WORKER_LOCK_CLASS],
  );
  return rows[0]?.pid;
}

async function heartbeatAt(): Promise<Date> {
  const row = await database.db.selectFrom('workers').select('heartbeat_at').where('id', '=', worker.id).executeTakeFirstOrThrow();
  return row.heartbeat_at;
}

test('a worker whose registry connection is terminated beats again and holds its liveness lock at once', async () => {
  const before = await heartbeatAt();
  const pid = await waitFor('the liveness lock', livenessHolder);
  await terminateBackend(database.url, pid);
  const again = await waitFor('a new connection to hold the liveness lock', async () => {
    const holder = await livenessHolder();
    return holder !== undefined && holder !== pid ? holder : undefined;
  });
  expect(again).not.toBe(pid);
  await waitFor('a heartbeat after the reconnection', async () => (await heartbeatAt()) > before);
});
