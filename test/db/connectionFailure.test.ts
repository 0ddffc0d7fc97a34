import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { isConnectionFailure, MayHaveCommittedError } from '../../src/db/connectionFailure.ts';
import { Database } from '../../src/db/Database.ts';
import { withTransaction } from '../../src/db/withTransaction.ts';
import { closedPort, terminateBackend, urlWithoutServer } from '../helpers/deadEnds.ts';
import { createTestDatabase, testLog } from '../helpers/testDatabase.ts';

/**
 * isConnectionFailure against the failures a real PostgreSQL gives: a server
 * that is not there, a backend terminated under a query or under its COMMIT,
 * a pool with no connection to give; and PostgreSQL's refusals, which are not.
 */
let database: Awaited<ReturnType<typeof createTestDatabase>>;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => {
  await database?.drop();
});

/** The error `promise` fails with (the test fails if it does not). */
async function failureOf(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => expect.unreachable('expected a failure'),
    (error: unknown) => error,
  );
}

test('a server that is not there, over TCP or a Unix socket, is a connection failure', async () => {
  const overSocket = new URL(database.url);
  overSocket.port = String(await closedPort());
  for (const url of [await urlWithoutServer(database.url), overSocket.toString()]) {
    const nowhere = Database.fromUrl(url, testLog);
    try {
      const error = await failureOf(sql`select 1`.execute(nowhere.db));
      expect(isConnectionFailure(error), String(error)).toBe(true);
    } finally {
      await nowhere.close();
    }
  }
});

test('a backend terminated under its query is a connection failure, and not one that may have committed', async () => {
  const error = await failureOf(
    withTransaction(database.db, async (trx) => {
      const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx);
      await terminateBackend(database.url, rows[0]!.pid);
      await sql`select 1`.execute(trx);
    }),
  );
  expect(isConnectionFailure(error)).toBe(true);
  expect(error).not.toBeInstanceOf(MayHaveCommittedError);
});

test('a backend terminated before its COMMIT got through: withTransaction says it may have committed', async () => {
  const error = await failureOf(
    withTransaction(database.db, async (trx) => {
      const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx);
      await terminateBackend(database.url, rows[0]!.pid);
    }),
  );
  expect(error).toBeInstanceOf(MayHaveCommittedError);
  expect(isConnectionFailure(error)).toBe(true);
});

test('a pool that cannot hand out a connection in time is a connection failure', async () => {
  const pool = new pg.Pool({ connectionString: database.url, max: 1 });
  const held = await pool.connect();
  // Only now a short wait: the one connection is taken, so the next asks in vain (the first may be slow to make).
  pool.options.connectionTimeoutMillis = 50;
  try {
    expect(isConnectionFailure(await failureOf(pool.query('select 1')))).toBe(true);
  } finally {
    held.release();
    await pool.end();
  }
});

test("PostgreSQL's refusals of a statement are not connection failures, and a failed statement's transaction is not 'may have committed'", async () => {
  for (const statement of [sql`select * from no_such_table`, sql`select 1/0`, sql`select pg_sleep('soon')`]) {
    const error = await failureOf(withTransaction(database.db, (trx) => statement.execute(trx)));
    expect(isConnectionFailure(error), String(error)).toBe(false);
    expect(error).not.toBeInstanceOf(MayHaveCommittedError);
  }
});
