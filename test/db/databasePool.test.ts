import { afterAll, beforeAll, expect, test } from 'vitest';
import { Database } from '../../src/db/Database.ts';
import { createLogger } from '../../src/log.ts';
import { createTestDatabase } from '../helpers/testDatabase.ts';

// The database is dropped right after the pools close, which ends their last connections from the server's side: nothing to report.
const quiet = createLogger('silent', 'test');

let database: Awaited<ReturnType<typeof createTestDatabase>>;

beforeAll(async () => {
  database = await createTestDatabase({ poolSize: 1 });
});
afterAll(async () => database?.drop());

test('a pool that keeps its connections opens them all at a server start; one that lets them go opens none', async () => {
  const kept = Database.fromUrl(database.url, quiet, { poolSize: 3, keepConnections: true });
  const passing = Database.fromUrl(database.url, quiet, { poolSize: 3 });
  try {
    // One already in use (a LISTEN connection, say) is counted, not waited for.
    const busy = await kept.pool.connect();
    await kept.openConnections();
    expect({ total: kept.pool.totalCount, idle: kept.pool.idleCount }).toEqual({ total: 3, idle: 2 });
    busy.release();
    await passing.openConnections();
    expect(passing.pool.totalCount).toBe(0);
  } finally {
    await kept.close();
    await passing.close();
  }
});
